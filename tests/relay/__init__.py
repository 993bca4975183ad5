"""Tests of carbon/relay: routers, placement, sending, spool, the relay daemon in-process
and as workers."""
