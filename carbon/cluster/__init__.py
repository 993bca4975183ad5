"""carbon-cluster: describe a federated cluster in one TOML file, run it, grow it.

``spec`` reads the cluster file, ``generate`` writes every daemon's configuration,
``control`` starts, stops and reports processes, ``agent`` is the per-host transfer
daemon, ``merge`` the whisper-fill merge, ``rebalance`` moves metrics when the ring
changes, ``router`` the relays' double-writing router during a move, ``cli`` the
console script.
"""
