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

from typing import Any

from carbon.config.errors import ConfigError


def _setting_error(settings: Any, key: str, message: str) -> ConfigError:
    return ConfigError(message, settings.get("config_file"), key=key)


def _checker(settings: Any) -> Any:
    from twisted.conch.checkers import InMemorySSHKeyDB, SSHPublicKeyChecker
    from twisted.conch.ssh import keys
    from twisted.cred.checkers import InMemoryUsernamePasswordDatabaseDontUse

    user = str(settings.MANHOLE_USER or "")
    if not user:
        raise _setting_error(settings, "MANHOLE_USER", "ENABLE_MANHOLE needs a user name")
    key = str(settings.MANHOLE_PUBLIC_KEY or "").strip()
    if key == "None":
        checker = InMemoryUsernamePasswordDatabaseDontUse()
        checker.addUser(user.encode("utf-8"), b"")
        return checker
    try:
        public = keys.Key.fromString(key.encode("utf-8"))
    except Exception as err:
        raise _setting_error(settings, "MANHOLE_PUBLIC_KEY", "not an OpenSSH public key (%s); "
                             "None allows an empty password" % err) from None
    return SSHPublicKeyChecker(InMemorySSHKeyDB({user.encode("utf-8"): [public]}))


def manhole_factory(settings: Any, namespace: dict[str, Any]) -> Any:
    """The SSH server factory of the manhole; ConfigError naming the key at fault."""
    try:
        from twisted.conch import manhole, manhole_ssh
        from twisted.conch.openssh_compat.factory import OpenSSHFactory
        from twisted.cred import portal
    except ImportError as err:
        raise _setting_error(settings, "ENABLE_MANHOLE", "needs twisted[conch] (%s)" % err) \
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
    factory = manhole_ssh.ConchFactory(portal.Portal(realm, [_checker(settings)]))
    key_dir = str(settings.MANHOLE_HOST_KEY_DIR or "")
    host_keys = OpenSSHFactory()
    host_keys.dataRoot = key_dir
    try:
        factory.publicKeys = host_keys.getPublicKeys()
        factory.privateKeys = host_keys.getPrivateKeys()
    except OSError as err:
        raise _setting_error(settings, "MANHOLE_HOST_KEY_DIR", "cannot read host keys: %s"
                             % err) from None
    if not factory.privateKeys:
        raise _setting_error(settings, "MANHOLE_HOST_KEY_DIR", "no ssh_host_*_key files in %r"
                             % key_dir)
    return factory


def listen_manhole(reactor: Any, settings: Any, namespace: dict[str, Any]) -> Any:
    """Listen on MANHOLE_INTERFACE:MANHOLE_PORT; returns the listening port."""
    return reactor.listenTCP(int(settings.MANHOLE_PORT), manhole_factory(settings, namespace),
                             interface=str(settings.MANHOLE_INTERFACE))
