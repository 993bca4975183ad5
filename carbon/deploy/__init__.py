"""Deployment: the systemd units (``systemd/``) and the distribution layout install
(``carbon-fast install-layout``)."""
