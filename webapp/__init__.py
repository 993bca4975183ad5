"""Django-free graphite-web compatible render app."""
