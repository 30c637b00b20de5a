# Sourced by .ci/run: the services the tests need, started on this machine for this run only.
#  - Debian's postgresql and chromium, installed when missing (apt-get, noninteractive);
#  - a throw-away PostgreSQL server on loopback (initdb + pg_ctl as the postgres user, trust auth,
#    in a temporary folder, stopped when .ci/run exits), exported as CRASHPOINT_TEST_PG_URL;
#  - CRASHPOINT_CI=1, so the tests that need PostgreSQL or Chromium fail instead of skipping.
export CRASHPOINT_CI=1

_need=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || _need+=(postgresql)
command -v chromium >/dev/null 2>&1 || _need+=(chromium)
if [ "${#_need[@]}" -gt 0 ]; then
    echo "ci: installing ${_need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${_need[@]}" >/dev/null
fi

_pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
_pgdir=$(mktemp -d /tmp/crashpoint-pg.XXXXXX)
chown postgres "$_pgdir"
_pgport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
runuser -u postgres -- "$_pgbin/initdb" -D "$_pgdir/data" -A trust -U postgres >/dev/null
runuser -u postgres -- "$_pgbin/pg_ctl" -D "$_pgdir/data" -l "$_pgdir/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $_pgport -k $_pgdir" start >/dev/null
_stop_pg() { runuser -u postgres -- "$_pgbin/pg_ctl" -D "$_pgdir/data" -m fast -w stop >/dev/null 2>&1 || true; rm -rf "$_pgdir"; }
trap _stop_pg EXIT
runuser -u postgres -- "$_pgbin/createdb" -h 127.0.0.1 -p "$_pgport" -U postgres crashpoint_test
export CRASHPOINT_TEST_PG_URL="postgresql+psycopg://postgres@127.0.0.1:$_pgport/crashpoint_test"
echo "ci: PostgreSQL on 127.0.0.1:$_pgport, $(chromium --version 2>/dev/null || echo 'no chromium')"
