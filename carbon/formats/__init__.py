"""The formats carbon reads and writes, one module each: plaintext lines, pickle frames
(with the safe unpickler); the whisper file format is carbon.storage.whisper_format."""
