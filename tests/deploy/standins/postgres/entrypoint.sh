#!/bin/sh
# First start: a cluster owned by POSTGRES_USER (password auth over TCP), database
# POSTGRES_DB; then PostgreSQL in the foreground on every address.
set -eu
data=/var/lib/postgresql/data
chown postgres:postgres "$data" && chmod 700 "$data"
if [ ! -s "$data/PG_VERSION" ]; then
    printf '%s\n' "$POSTGRES_PASSWORD" > /tmp/pw && chown postgres /tmp/pw
    su postgres -s /bin/sh -c "initdb -D $data -U $POSTGRES_USER --pwfile=/tmp/pw -E UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null"
    rm -f /tmp/pw
    echo "host all all 0.0.0.0/0 scram-sha-256" >> "$data/pg_hba.conf"
    su postgres -s /bin/sh -c "pg_ctl -D $data -o '-c listen_addresses=' -w start >/dev/null"
    su postgres -s /bin/sh -c "createdb -U $POSTGRES_USER $POSTGRES_DB"
    su postgres -s /bin/sh -c "pg_ctl -D $data -m fast -w stop >/dev/null"
fi
exec su postgres -s /bin/sh -c "exec postgres -D $data -c listen_addresses='*'"
