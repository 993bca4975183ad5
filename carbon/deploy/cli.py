"""``carbon-fast``: deployment commands. ``carbon-fast install-layout`` installs the
package as systemd services in the distribution layout (carbon.deploy.layout)."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from carbon.deploy.layout import DEFAULT_ENABLED, Layout, plan


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="carbon-fast")
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser(
        "install-layout", help="install the systemd units, the _graphite user, the folders "
        "and a default /etc/carbon config (an existing config is kept)",
        description="Install carbon-fast as systemd services in Debian's layout: "
        "/etc/carbon, /etc/graphite/local_settings.py, /var/lib/graphite/whisper, "
        "/var/log/carbon, /run/carbon, user _graphite. Safe to run again (after an "
        "upgrade: the units are rewritten, config files are never overwritten).")
    defaults = Layout()
    add = install.add_argument
    add("--root", default="/", help="install into this folder as if it were / "
        "(packaging, tests); no running systemd is asked (default /)")
    add("--dry-run", action="store_true", help="say what would be done, change nothing")
    add("--bindir", default=defaults.bindir, help="where the installed system finds "
        "carbon-cache.py and graphite-render (default: this installation's, %(default)s)")
    add("--conf-dir", default=defaults.conf_dir, help="carbon's config (%(default)s)")
    add("--render-settings", default=defaults.render_settings,
        help="the render app's settings file (%(default)s)")
    add("--storage-dir", default=defaults.storage_dir,
        help="STORAGE_DIR; whisper files go in its whisper/ (%(default)s)")
    add("--log-dir", default=defaults.log_dir, help="LOG_DIR (%(default)s)")
    add("--user", default=defaults.user, help="system user and group (%(default)s)")
    add("--unit-dir", default=defaults.unit_dir, help="where the units go (%(default)s)")
    add("--enable", action="append", metavar="UNIT", help="enable UNIT into carbon.target "
        "(repeat; default: %s, what the default config runs)" % " ".join(DEFAULT_ENABLED))
    add("--no-enable", action="store_true", help="enable nothing")
    return parser


def install_layout(args: argparse.Namespace) -> int:
    enable = () if args.no_enable else tuple(
        unit if "." in unit else unit + ".service" for unit in (args.enable or DEFAULT_ENABLED))
    layout = Layout(root=args.root, conf_dir=args.conf_dir,
                    render_settings=args.render_settings, storage_dir=args.storage_dir,
                    log_dir=args.log_dir, user=args.user, group=args.user,
                    bindir=args.bindir, unit_dir=args.unit_dir, enable=enable)
    steps = plan(layout)
    for step in steps:
        print(("would: " + step.describe()) if args.dry_run else step.run(), flush=True)
    if not args.dry_run and args.root == "/":
        print("next: systemctl enable --now carbon.target   (or start it once: "
              "systemctl start carbon.target)")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "install-layout":
        return install_layout(args)
    return 2  # pragma: no cover - argparse requires a command


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
