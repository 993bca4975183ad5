"""Storage backends (DATABASE in carbon.conf); whisper is built in."""
