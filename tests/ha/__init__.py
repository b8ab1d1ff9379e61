"""Tests of the database surviving its primary's loss: pg_auto_failover clusters on loopback."""
