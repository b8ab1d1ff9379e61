#!/bin/sh
# One pg_auto_failover service of docker-compose.ha.yml: `pgaf.sh monitor` or `pgaf.sh node`.
# The first start creates it in $PGDATA (the monitor with deploy/ha/monitor.conf's timings; a
# node registers with the monitor, the first as primary, the next ones copy it and follow; the
# servers on the network reach the tripeaks database as postgres: trust on the compose network,
# which publishes no database port);
# every start then runs it (`pg_autoctl run`: the keeper restarts PostgreSQL and follows the
# monitor's orders; a node that was primary and comes back rejoins as a standby).
#
# Environment: PGAF_HOSTNAME (this container's name on the network), PGAF_MONITOR (a node's
# monitor URL), PGAF_NAME (a node's name), PGAF_NUMBER_SYNC_STANDBYS (set on the monitor's
# formation by the last node to join: 1 with two standbys).
set -eu
role=${1:?usage: pgaf.sh monitor|node}
mkdir -p "$XDG_CONFIG_HOME" "$XDG_DATA_HOME"

case "$role" in
monitor)
  if [ ! -f "$PGDATA/postgresql.conf" ]; then
    pg_autoctl create monitor --pgdata "$PGDATA" --pgport 5432 \
      --hostname "$PGAF_HOSTNAME" --auth trust --no-ssl
    cat /etc/tripeaks/monitor.conf >>"$PGDATA/postgresql.auto.conf"
  fi
  ;;
node)
  if [ ! -f "$PGDATA/postgresql.conf" ]; then
    pg_autoctl create postgres --pgdata "$PGDATA" --pgport 5432 \
      --hostname "$PGAF_HOSTNAME" --name "$PGAF_NAME" --monitor "$PGAF_MONITOR" \
      --auth trust --no-ssl --dbname tripeaks --username postgres --pg-hba-lan
  fi
  if [ -n "${PGAF_NUMBER_SYNC_STANDBYS:-}" ]; then
    # Runs once the node is up: the formation needs the standbys before it can require them.
    (
      while [ "$(pg_autoctl show state --pgdata "$PGDATA" 2>/dev/null | grep -c ' secondary ')" \
        -le "$PGAF_NUMBER_SYNC_STANDBYS" ]; do
        sleep 2
      done
      pg_autoctl set formation number-sync-standbys --pgdata "$PGDATA" \
        "$PGAF_NUMBER_SYNC_STANDBYS"
    ) &
  fi
  ;;
*)
  echo "pgaf.sh: unknown role $role (monitor or node)" >&2
  exit 2
  ;;
esac
exec pg_autoctl run --pgdata "$PGDATA"
