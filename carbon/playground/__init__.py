"""The tuning playground: a load generator, scenario sweeps over real daemons, reports."""
