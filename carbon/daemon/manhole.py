"""ENABLE_MANHOLE: carbon's manhole, an SSH Python shell inside the running daemon.

Twisted's own manhole (``twisted.conch.manhole``) served over SSH
(``twisted.conch.manhole_ssh``) on MANHOLE_INTERFACE:MANHOLE_PORT (127.0.0.1:7222 by
default). MANHOLE_USER logs in with the key MANHOLE_PUBLIC_KEY (an OpenSSH public key
line); ``MANHOLE_PUBLIC_KEY = None`` lets him in with an empty password, as carbon
does. The server's host keys are the ``ssh_host_*_key`` files of MANHOLE_HOST_KEY_DIR.
The shell's namespace holds ``daemon`` (the running daemon) and ``settings``.
Needs ``twisted[conch]`` (pip install 'carbon-fast[manhole]').
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from carbon.config.errors import ConfigError
from carbon.config.settings import Settings
from carbon.receivers.listeners import ReceiverOptions, ReceiverSpec


@dataclass(frozen=True)
class ManholeConfig(ReceiverOptions):
    """What the manhole reads of carbon.conf besides MANHOLE_INTERFACE and MANHOLE_PORT
    (the receiver's interface and port); checked when it opens."""

    user: str  # MANHOLE_USER
    public_key: str  # MANHOLE_PUBLIC_KEY ("None": an empty password)
    host_key_dir: str  # MANHOLE_HOST_KEY_DIR
    config_file: str | None  # named by a ConfigError

    @classmethod
    def from_settings(cls, settings: Settings) -> ManholeConfig:
        return cls(user=str(settings["MANHOLE_USER"] or ""),
                   public_key=str(settings["MANHOLE_PUBLIC_KEY"] or "").strip(),
                   host_key_dir=str(settings["MANHOLE_HOST_KEY_DIR"] or ""),
                   config_file=settings.get("config_file"))


def manhole_receiver(settings: Settings) -> ReceiverSpec:
    """The manhole as a receiver of a daemon's composition (ENABLE_MANHOLE)."""
    return ReceiverSpec("manhole", str(settings["MANHOLE_INTERFACE"]),
                        int(settings["MANHOLE_PORT"]),
                        options=ManholeConfig.from_settings(settings))


def _setting_error(config: ManholeConfig, key: str, message: str) -> ConfigError:
    return ConfigError(message, config.config_file, key=key)


def _checker(config: ManholeConfig) -> Any:
    from twisted.conch.checkers import InMemorySSHKeyDB, SSHPublicKeyChecker
    from twisted.conch.ssh import keys
    from twisted.cred.checkers import InMemoryUsernamePasswordDatabaseDontUse

    user = config.user
    if not user:
        raise _setting_error(config, "MANHOLE_USER", "ENABLE_MANHOLE needs a user name")
    key = config.public_key
    if key == "None":
        checker = InMemoryUsernamePasswordDatabaseDontUse()
        checker.addUser(user.encode("utf-8"), b"")
        return checker
    try:
        public = keys.Key.fromString(key.encode("utf-8"))
    except Exception as err:
        raise _setting_error(config, "MANHOLE_PUBLIC_KEY", "not an OpenSSH public key (%s); "
                             "None allows an empty password" % err) from None
    return SSHPublicKeyChecker(InMemorySSHKeyDB({user.encode("utf-8"): [public]}))


def manhole_factory(config: ManholeConfig, namespace: dict[str, Any]) -> Any:
    """The SSH server factory of the manhole; ConfigError naming the key at fault."""
    try:
        from twisted.conch import manhole, manhole_ssh
        from twisted.conch.openssh_compat.factory import OpenSSHFactory
        from twisted.cred import portal
    except ImportError as err:
        raise _setting_error(config, "ENABLE_MANHOLE", "needs twisted[conch] (%s)" % err) \
            from None
    class Session(manhole_ssh.TerminalSession):
        """Twisted's terminal session, minus its NotImplementedError tracebacks."""

        proto: Any = None

        def openShell(self, proto: Any) -> None:  # noqa: N802 (ISession)
            self.proto = proto
            super().openShell(proto)

        def eofReceived(self) -> None:  # noqa: N802 (ISession): input ended, end the shell
            if self.proto is not None:
                self.proto.loseConnection()

        def windowChanged(self, size: Any) -> None:  # noqa: N802 (ISession)
            pass

    realm = manhole_ssh.TerminalRealm()
    realm.sessionFactory = Session
    realm.chainedProtocolFactory.protocolFactory = lambda _avatar: manhole.Manhole(namespace)
    factory = manhole_ssh.ConchFactory(portal.Portal(realm, [_checker(config)]))
    key_dir = config.host_key_dir
    host_keys = OpenSSHFactory()
    host_keys.dataRoot = key_dir
    try:
        factory.publicKeys = host_keys.getPublicKeys()
        factory.privateKeys = host_keys.getPrivateKeys()
    except OSError as err:
        raise _setting_error(config, "MANHOLE_HOST_KEY_DIR", "cannot read host keys: %s"
                             % err) from None
    if not factory.privateKeys:
        raise _setting_error(config, "MANHOLE_HOST_KEY_DIR", "no ssh_host_*_key files in %r"
                             % key_dir)
    return factory


def listen_manhole(reactor: Any, receiver: ReceiverSpec, namespace: dict[str, Any]) -> Any:
    """Listen on MANHOLE_INTERFACE:MANHOLE_PORT (``receiver``, with its ManholeConfig);
    returns the listening port."""
    assert isinstance(receiver.options, ManholeConfig), receiver
    return reactor.listenTCP(receiver.port, manhole_factory(receiver.options, namespace),
                             interface=receiver.interface)
