"""graphite-web's events: an SQLite store (events_event) and the /events endpoints."""
