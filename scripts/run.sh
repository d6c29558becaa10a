#!/usr/bin/env bash
# `make run`: builds the binaries, makes sure Postgres and Redis are up,
# starts the dev broker and the three services, drives a short demo load and
# shows the pipeline working; then keeps the stack running until Ctrl-C,
# which stops everything this script started.
#
# Usage: scripts/run.sh [--demo-only] [--no-demo]
#   --demo-only (or RUN_DEMO_ONLY=1)  exit after the demo (CI smoke test)
#   --no-demo   (or RUN_NO_DEMO=1)    start the stack and wait, no demo load
# Environment (defaults in brackets):
#   RUN_API_PORT [8080]  RUN_BROKER_PORT [9092]  RUN_ADMIN_PORTS ["9100 9101 9102"]
#   RECEIPTS_PG_URL [postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable]
#   RECEIPTS_REDIS_URL [redis://127.0.0.1:6379/0]
#   DEMO_DURATION [10s]  DEMO_RATE [3000]  DEMO_USERS [1000]  DEMO_CHANNELS [50]
#   READY_TIMEOUT [60] seconds to wait for each service's /readyz
#   RUN_SERVICE_BIN [bin] directory of the service binaries to run (another
#     build's kafkagate, persister, dlt-reconciler and devbroker: before/after runs)
# Logs: .run/<service>.log. Kafka data: .devdata/kafka, the gateway's spool:
# .devdata/spool (delete .devdata to start afresh).
set -euo pipefail
cd "$(dirname "$0")/.."

demo_only=${RUN_DEMO_ONLY:-0}
no_demo=${RUN_NO_DEMO:-0}
for arg in "$@"; do
  case $arg in
    --demo-only) demo_only=1 ;;
    --no-demo) no_demo=1 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $arg" >&2; exit 2 ;;
  esac
done

api_port=${RUN_API_PORT:-8080}
broker_port=${RUN_BROKER_PORT:-9092}
read -r gate_admin persister_admin reconciler_admin <<<"${RUN_ADMIN_PORTS:-9100 9101 9102}"
pg_url=${RECEIPTS_PG_URL:-postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable}
redis_url=${RECEIPTS_REDIS_URL:-redis://127.0.0.1:6379/0}
ready_timeout=${READY_TIMEOUT:-60}
api=http://127.0.0.1:$api_port
brokers=127.0.0.1:$broker_port
run_dir=.run
data_dir=.devdata/kafka

bold() { if [ -t 1 ]; then printf '\033[1m%s\033[0m\n' "$*"; else printf '%s\n' "$*"; fi; }
step() { bold "==> $*"; }
die() { echo "run.sh: $*" >&2; exit 1; }
tcp_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# 1. Ports: refuse to start next to another stack.
busy=()
for p in "$api_port" "$broker_port" "$gate_admin" "$persister_admin" "$reconciler_admin"; do
  if tcp_open 127.0.0.1 "$p"; then
    who=""
    if command -v ss >/dev/null; then
      who=$(ss -ltnpH "sport = :$p" 2>/dev/null | grep -o 'users:(([^)]*' | head -n 1 | sed 's/users:((//')
    fi
    busy+=("127.0.0.1:$p${who:+ (held by $who)}")
  fi
done
if [ ${#busy[@]} -gt 0 ]; then
  echo "run.sh: ports already in use — is another stack running (make run in another shell, an e2e test)?" >&2
  printf '  - %s\n' "${busy[@]}" >&2
  echo "Stop it, or pick other ports: RUN_API_PORT, RUN_BROKER_PORT, RUN_ADMIN_PORTS=\"a b c\"." >&2
  exit 1
fi

# 2. Build. RUN_SERVICE_BIN may name a directory of another build's
#    service binaries (kafkagate, persister, dlt-reconciler, devbroker) to
#    run instead, beside this build's tools: a before/after run.
step "building bin/"
go build -o bin/ ./cmd/...
svc_bin=${RUN_SERVICE_BIN:-bin}

# 3. Postgres and Redis.
step "checking Postgres and Redis (scripts/services.sh)"
scripts/services.sh

mkdir -p "$run_dir" "$data_dir"
setsid=""
command -v setsid >/dev/null && setsid=setsid
pids=()
names=()

stop_all() {
  local rc=$?
  trap - EXIT INT TERM
  if [ ${#pids[@]} -gt 0 ]; then
    step "stopping ${names[*]}"
    # Reverse start order: services first, the broker last (it snapshots).
    local i
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
      kill -TERM "${pids[i]}" 2>/dev/null || true
      local deadline=$((SECONDS + 15))
      while kill -0 "${pids[i]}" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
      if kill -0 "${pids[i]}" 2>/dev/null; then
        echo "run.sh: ${names[i]} did not stop within 15 s; killing it" >&2
        kill -KILL "${pids[i]}" 2>/dev/null || true
      fi
      wait "${pids[i]}" 2>/dev/null || true
    done
  fi
  exit "$rc"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# start NAME ARGS...: runs bin/NAME in the background, logging to .run/NAME.log.
# setsid puts it in its own session, so a Ctrl-C in the terminal reaches only
# this script, which then stops the services in order (the broker last).
start() {
  local name=$1; shift
  $setsid "$svc_bin/$name" "$@" >"$run_dir/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}

log_tail() {
  echo "---- last lines of $run_dir/$1.log ----" >&2
  tail -n 40 "$run_dir/$1.log" >&2 || true
}

# wait_until NAME SECONDS CMD...: polls CMD until it succeeds; fails with the
# log tail when NAME's process exits or the deadline passes.
wait_until() {
  local name=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs)) i pid=""
  for i in "${!names[@]}"; do [ "${names[i]}" = "$name" ] && pid=${pids[i]}; done
  until "$@"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      log_tail "$name"
      die "$name exited during start-up"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log_tail "$name"
      die "$name not ready within $secs s"
    fi
    sleep 0.2
  done
}

ready() { curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$1/readyz"; }

# 4. Broker.
step "starting devbroker on $brokers (data in $data_dir)"
start devbroker --listen-port "$broker_port" --data-dir "$data_dir"
wait_until devbroker 30 tcp_open 127.0.0.1 "$broker_port"

# 5. Schema, then the services.
step "applying migrations (persister migrate)"
"$svc_bin/persister" migrate --pg-url "$pg_url"

common=(--brokers "$brokers" --pg-url "$pg_url")
step "starting kafkagate ($api), persister, dlt-reconciler"
start kafkagate --listen "127.0.0.1:$api_port" --admin-addr "127.0.0.1:$gate_admin" "${common[@]}" --redis-url "$redis_url" \
  --spool-dir .devdata/spool
start persister --admin-addr "127.0.0.1:$persister_admin" "${common[@]}"
start dlt-reconciler --admin-addr "127.0.0.1:$reconciler_admin" "${common[@]}" --redis-url "$redis_url"
wait_until kafkagate "$ready_timeout" ready "$gate_admin"
wait_until persister "$ready_timeout" ready "$persister_admin"
wait_until dlt-reconciler "$ready_timeout" ready "$reconciler_admin"
echo "all ready: API $api, admin (/metrics /readyz) on 127.0.0.1:$gate_admin, :$persister_admin, :$reconciler_admin; logs in $run_dir/"

# 6. Demo.
if [ "$no_demo" != 1 ]; then
  # A fresh user prefix per run, so the demo's marks advance cursors even
  # when Postgres and Redis still hold an earlier run's state.
  prefix="demo$(date +%s)-u"
  step "demo load: ${DEMO_DURATION:-10s} at ${DEMO_RATE:-3000} events/s, ${DEMO_USERS:-1000} users x ${DEMO_CHANNELS:-50} channels, zipf 1.1, 20% duplicates, 10% out of order"
  bin/receiptsctl load --target "$api" --duration "${DEMO_DURATION:-10s}" --rate "${DEMO_RATE:-3000}" \
    --users "${DEMO_USERS:-1000}" --channels "${DEMO_CHANNELS:-50}" --user-prefix "$prefix" \
    --zipf 1.1 --dup 0.2 --reorder 0.1 --batch 50 --concurrency 8 --seed "$(date +%s)" \
    --pg-url "$pg_url" --wait-lag --brokers "$brokers" --strict

  step "what the pipeline holds now"
  rows=$(psql "$pg_url" -qtAc "SELECT count(*) FROM read_receipts" 2>/dev/null || echo "?")
  demo_rows=$(psql "$pg_url" -qtAc "SELECT count(*) FROM read_receipts WHERE user_id LIKE '${prefix}%'" 2>/dev/null || echo "?")
  echo "rows in Postgres read_receipts: $rows (this demo's keys: $demo_rows)"
  lag=$(bin/receiptsctl lag --brokers "$brokers")
  echo "${lag%%$'\n'*}"
  echo
  echo "\$ curl -s $api/v1/users/${prefix}0/read-state"
  body=$(curl -sS --max-time 5 "$api/v1/users/${prefix}0/read-state")
  echo "${body:0:700}"
  echo
  echo "\$ bin/receiptsctl inspect --user ${prefix}0   # Redis vs Postgres"
  inspect=$(bin/receiptsctl inspect --user "${prefix}0" --pg-url "$pg_url" --redis-url "$redis_url")
  sed -n '1,12p' <<<"$inspect"

  # Channels and counts: a channel of three, messages with mentions, and
  # alice's unread and mention counts (and badge) as she reads.
  ch="${prefix%-u}-general"
  alice="${prefix}alice"
  step "channels and counts: $ch, members ${prefix}{alice,bob,carol}"
  api_call() { # METHOD PATH [BODY]: the answer, or the demo fails
    local out
    if ! out=$(curl -fsS --max-time 5 -X "$1" "$api$2" -H 'Content-Type: application/json' ${3:+-d "$3"}); then
      die "demo: $1 $2 failed"
    fi
    printf '%s' "$out"
  }
  field() { # protojson leaves zero values out
    local v
    v=$(grep -o "\"$1\":\"\{0,1\}[0-9a-z]*" <<<"$2" | head -1 | sed 's/.*:"\{0,1\}//')
    printf '%s' "${v:-0}"
  }
  counts() { # what a chat UI would render for alice
    local u
    u=$(api_call GET "/v1/users/$alice/unread")
    printf '  %-34s unread=%s mentions=%s first_unread=%s | badge: unread_total=%s mention_total=%s\n' "$1" \
      "$(field unreadCount "$u")" "$(field mentionCount "$u")" "$(field firstUnreadSeq "$u")" \
      "$(field unreadTotal "$u")" "$(field mentionTotal "$u")"
  }
  for u in alice bob carol; do api_call PUT "/v1/channels/$ch/members/${prefix}$u" '{}' >/dev/null; done
  echo "\$ curl -s -X POST $api/v1/messages:notify -d '{\"notices\":[...5 messages from bob, alice mentioned in 3 and 5...]}'"
  notices=""
  for seq in 1 2 3 4 5; do
    mentions="[]"
    if [ "$seq" = 3 ] || [ "$seq" = 5 ]; then mentions="[\"$alice\"]"; fi
    notices="$notices${notices:+,}{\"channel_id\":\"$ch\",\"seq\":$seq,\"message_id\":\"m$seq\",\"sender_id\":\"${prefix}bob\",\"mentions\":$mentions}"
  done
  api_call POST /v1/messages:notify "{\"notices\":[$notices]}" >/dev/null
  echo "\$ curl -s $api/v1/users/$alice/unread"
  counts "after 5 messages:"
  api_call POST "/v1/users/$alice/channels/$ch/read" '{"seq": 3}' >/dev/null
  counts "alice read to 3:"
  api_call POST "/v1/users/$alice/channels/$ch/unread" '{"seq": 2}' >/dev/null
  counts "alice marked unread from 2:"
  api_call POST "/v1/users/$alice/read-all" '{}' >/dev/null
  counts "alice read all:"
  echo "\$ curl -s $api/v1/channels/$ch"
  body=$(api_call GET "/v1/channels/$ch")
  echo "  ${body:0:300}"

  # ---- threads: replies to message 5, alice's followed threads ----
  # A reply counts in its thread only: alice's channel unread stays as it
  # was while unreadThreads says a followed thread has news. Each count is
  # checked, so a wrong one fails the demo.
  step "threads: bob and carol reply to message 5 of $ch, alice mentioned"
  expect() { # NAME WANT GOT
    [ "$3" = "$2" ] || die "demo: $1 is $3, want $2"
  }
  thread_counts() { # alice's followed threads and her unread, checked
    local t u
    t=$(api_call GET "/v1/users/$alice/threads")
    u=$(api_call GET "/v1/users/$alice/unread")
    printf '  %-34s thread: unread=%s mentions=%s following=%s | channel: unread=%s unreadThreads=%s threadMentions=%s\n' "$1" \
      "$(field unreadCount "$t")" "$(field mentionCount "$t")" "$(field following "$t")" \
      "$(field unreadCount "$u")" "$(field unreadThreads "$u")" "$(field threadMentionCount "$u")"
    expect "thread unreadCount" "$2" "$(field unreadCount "$t")"
    expect "thread mentionCount" "$3" "$(field mentionCount "$t")"
    expect "channel unreadCount" "$chan_unread" "$(field unreadCount "$u")"
    expect "unreadThreads" "$4" "$(field unreadThreads "$u")"
  }
  chan_unread=$(field unreadCount "$(api_call GET "/v1/users/$alice/unread")")
  thread="/v1/channels/$ch/threads/5/messages"
  echo "\$ curl -s -X POST $api$thread -d '{\"seq\":1,\"message_id\":\"r1\",\"sender_id\":\"${prefix}bob\",\"mentions\":[\"$alice\"]}'"
  api_call POST "$thread" "{\"seq\":1,\"message_id\":\"r1\",\"sender_id\":\"${prefix}bob\",\"mentions\":[\"$alice\"]}" >/dev/null
  echo "\$ curl -s -X POST $api$thread -d '{\"seq\":2,\"message_id\":\"r2\",\"sender_id\":\"${prefix}carol\"}'"
  api_call POST "$thread" "{\"seq\":2,\"message_id\":\"r2\",\"sender_id\":\"${prefix}carol\"}" >/dev/null
  echo "\$ curl -s $api/v1/users/$alice/threads; curl -s $api/v1/users/$alice/unread"
  thread_counts "after 2 replies:" 2 1 1
  echo "\$ curl -s -X POST $api/v1/users/$alice/channels/$ch/threads/5/read -d '{\"seq\": 1}'"
  api_call POST "/v1/users/$alice/channels/$ch/threads/5/read" '{"seq": 1}' >/dev/null
  thread_counts "alice read the thread to 1:" 1 0 1
  api_call POST "/v1/users/$alice/channels/$ch/threads/5/read" '{"seq": 2}' >/dev/null
  thread_counts "alice read the thread to 2:" 0 0 0
  # ---- end threads ----

  # ---- counts people trust: deletions, @channel, mute, private mark-unread ----
  # Each count is checked (expect), so a wrong one fails the demo.
  tr="${prefix%-u}-trust"
  step "counts people trust: $tr, members ${prefix}{alice,bob,carol}"
  for u in alice bob carol; do api_call PUT "/v1/channels/$tr/members/${prefix}$u" '{}' >/dev/null; done
  trust_counts() { # LABEL UNREAD MENTIONS FIRST: alice's counts in $tr, checked
    local u c
    u=$(api_call GET "/v1/users/$alice/unread?channel_id=$tr")
    printf '  %-44s unread=%s mentions=%s first_unread=%s\n' "$1" \
      "$(field unreadCount "$u")" "$(field mentionCount "$u")" "$(field firstUnreadSeq "$u")"
    expect "unreadCount" "$2" "$(field unreadCount "$u")"
    expect "mentionCount" "$3" "$(field mentionCount "$u")"
    expect "firstUnreadSeq" "$4" "$(field firstUnreadSeq "$u")"
  }
  notices=""
  for seq in 1 2 3 4 5 6; do
    extra=""
    [ "$seq" = 4 ] && extra=",\"mentions\":[\"$alice\"]"
    [ "$seq" = 5 ] && extra=",\"mention_all\":true"
    notices="$notices${notices:+,}{\"channel_id\":\"$tr\",\"seq\":$seq,\"message_id\":\"m$seq\",\"sender_id\":\"${prefix}bob\"$extra}"
  done
  echo "\$ curl -s -X POST $api/v1/messages:notify -d '{\"notices\":[...6 from bob: alice mentioned in 4, @channel (\"mention_all\":true) in 5...]}'"
  api_call POST /v1/messages:notify "{\"notices\":[$notices]}" >/dev/null
  trust_counts "after 6 messages:" 6 2 1
  echo "\$ curl -s -X DELETE $api/v1/channels/$tr/messages/4   # and 1"
  api_call DELETE "/v1/channels/$tr/messages/4" >/dev/null
  api_call DELETE "/v1/channels/$tr/messages/1" >/dev/null
  trust_counts "messages 1 and 4 deleted:" 4 1 2
  badge() { field unreadTotal "$(api_call GET "/v1/users/$alice/unread")"; }
  before=$(badge)
  echo "\$ curl -s -X PUT $api/v1/users/$alice/channels/$tr/notifications -d '{\"level\":\"all\",\"muted_until_unix_ms\":<in an hour>}'"
  api_call PUT "/v1/users/$alice/channels/$tr/notifications" "{\"level\":\"all\",\"muted_until_unix_ms\":$(( $(date +%s) * 1000 + 3600000 ))}" >/dev/null
  after=$(badge)
  trust_counts "muted (its own counts stay):" 4 1 2
  printf '  %-44s unread_total %s -> %s\n' "alice's badge leaves the muted channel out:" "$before" "$after"
  expect "badge unread_total after the mute" "$((before - 4))" "$after"
  api_call PUT "/v1/users/$alice/channels/$tr/notifications" '{"level":"all"}' >/dev/null
  api_call POST "/v1/users/$alice/channels/$tr/read" '{"seq": 6}' >/dev/null
  readers() { # message 5's readers as bob sees them
    api_call GET "/v1/channels/$tr/messages/5/receipts?sender_id=${prefix}bob" | grep -o '"readBy":\[[^]]*\]' |
      grep -o '"userId":"[^"]*"' | sed "s/\"userId\":\"${prefix}//; s/\"//" | tr '\n' ' '
  }
  trust_counts "alice read to 6:" 0 0 0
  echo "\$ curl -s -X POST $api/v1/users/$alice/channels/$tr/unread -d '{\"seq\": 5}'"
  api_call POST "/v1/users/$alice/channels/$tr/unread" '{"seq": 5}' >/dev/null
  trust_counts "alice marked 5 unread (her own view):" 2 1 5
  printf '  %-44s %s\n' "message 5 read by, as bob sees it:" "$(readers)"
  case " $(readers)" in *" alice "*) ;; *) die "demo: alice's mark-unread moved her public receipt" ;; esac
  echo "\$ curl -s '$api/v1/users/$alice/inbox?limit=3'   # her channels, newest activity first"
  inbox=$(api_call GET "/v1/users/$alice/inbox?limit=3")
  printf '  first line: channel=%s unread=%s first_unread_message_id=%s\n' "$(grep -o '"channelId":"[^"]*"' <<<"$inbox" | head -1 | cut -d'"' -f4)" \
    "$(field unreadCount "$inbox")" "$(field firstUnreadMessageId "$inbox")"
  expect "the inbox's first channel" "$tr" "$(grep -o '"channelId":"[^"]*"' <<<"$inbox" | head -1 | cut -d'"' -f4)"
  expect "firstUnreadMessageId" "m5" "$(field firstUnreadMessageId "$inbox")"
  # ---- end counts people trust ----

  # ---- watch: a live watch stream over server-sent events ----
  # curl -N on the SSE route in the background while carol reads;
  # each "data:" line is a WatchEvent (the first one the snapshot).
  step "watch: server-sent events of $ch while carol receives and reads"
  watch_out="$run_dir/watch-demo.sse"
  echo "\$ curl -N '$api/v1/channels:watch?channel_id=$ch' &"
  curl -sN --max-time 3 "$api/v1/channels:watch?channel_id=$ch" >"$watch_out" 2>/dev/null &
  watch_pid=$!
  for seq in 2 4 5; do
    api_call POST "/v1/users/${prefix}carol/channels/$ch/delivered" "{\"seq\": $seq}" >/dev/null
    api_call POST "/v1/users/${prefix}carol/channels/$ch/read" "{\"seq\": $((seq - 1))}" >/dev/null
  done
  wait "$watch_pid" 2>/dev/null || true # curl ends at --max-time
  grep '^data: ' "$watch_out" | cut -c1-220 | sed 's/^/  /'
  grep -q '"updates"' "$watch_out" || echo "  (warning: the watch stream showed no update; see $run_dir/kafkagate.log)"
  # ---- end watch ----

  # ---- read-by: who has seen a message, live ----
  # A group of four; dave turns share_read_receipts off; bob posts three
  # messages; a watch stream (SSE) is open while the others receive and
  # then read one by one. Then the receipts of message 3 and the ticks.
  grp="${prefix%-u}-team"
  step "read-by: $grp, members ${prefix}{alice,bob,carol,dave}; dave does not share read receipts"
  have_jq=0
  command -v jq >/dev/null && have_jq=1
  short() { sed "s/${prefix}//g"; } # user ids without the run's prefix
  for u in alice bob carol dave; do api_call PUT "/v1/channels/$grp/members/${prefix}$u" '{}' >/dev/null; done
  echo "\$ curl -s -X PUT $api/v1/users/${prefix}dave/settings -d '{\"share_read_receipts\": false}'"
  settings=$(api_call PUT "/v1/users/${prefix}dave/settings" '{"share_read_receipts": false}')
  if [ "$have_jq" = 1 ]; then
    jq -r '"  \(.userId): share_read_receipts=\(.shareReadReceipts // false) share_delivery_receipts=\(.shareDeliveryReceipts // false)"' <<<"$settings" | short
  else
    echo "  $(short <<<"$settings")"
  fi
  echo
  # The stream, each line stamped with its arrival (ms since the stream
  # opened); curl's pid goes to a file so it can be stopped once the reads
  # are done (--max-time bounds it if the script dies first).
  rb_out="$run_dir/readby-demo.sse"
  rb_pidf="$run_dir/readby-demo.pid"
  rb_t0=${EPOCHREALTIME/[.,]/}
  echo "\$ curl -N '$api/v1/channels:watch?channel_id=$grp' &"
  { (curl -sN --max-time 30 "$api/v1/channels:watch?channel_id=$grp" 2>/dev/null & echo $! >"$rb_pidf"; wait) |
      while IFS= read -r line; do
        [ -n "$line" ] && printf '%6d %s\n' $(((${EPOCHREALTIME/[.,]/} - rb_t0) / 1000)) "$line"
      done >"$rb_out"; } &
  rb_stamp=$!
  for _ in $(seq 50); do grep -q ' data: ' "$rb_out" 2>/dev/null && break; sleep 0.1; done
  receipts_line() { # LABEL: message 3's read_by and pending, one line
    local r
    r=$(api_call GET "/v1/channels/$grp/messages/3/receipts?sender_id=${prefix}bob")
    if [ "$have_jq" = 1 ]; then
      r=$(jq -r '"read_by=[" + ([.readBy[]?.userId] | join(" ")) + "] pending=[" + ([.pending[]?] | join(" ")) + "]"' <<<"$r")
    fi
    printf '  %-28s %s\n' "$1" "$(short <<<"$r")"
  }
  echo "bob posts messages 1-3 (POST /v1/channels/$grp/messages); the others receive and read;"
  echo "message 3's receipts after each step (GET /v1/channels/$grp/messages/3/receipts):"
  for seq in 1 2 3; do
    api_call POST "/v1/channels/$grp/messages" "{\"seq\": $seq, \"message_id\": \"t$seq\", \"sender_id\": \"${prefix}bob\"}" >/dev/null
  done
  receipts_line "after bob's post:"
  sleep 0.3
  for u in alice carol dave; do
    api_call POST "/v1/users/${prefix}$u/channels/$grp/delivered" '{"seq": 3}' >/dev/null
  done
  receipts_line "delivered to all three:"
  for u in alice carol dave; do
    sleep 0.3
    api_call POST "/v1/users/${prefix}$u/channels/$grp/read" '{"seq": 3}' >/dev/null
    receipts_line "$u reads to 3:"
  done
  sleep 0.3 # one coalescing window (--watch-coalesce, 100 ms) and some
  kill "$(cat "$rb_pidf")" 2>/dev/null || true
  wait "$rb_stamp" 2>/dev/null || true
  echo
  echo "the watch stream as it arrived (ms since it opened):"
  if [ "$have_jq" = 1 ]; then
    grep ' data: ' "$rb_out" | while read -r ms _ json; do
      printf '  +%5sms  %s\n' "$ms" "$(jq -r '
        if (.snapshot | length) > 0 then
          "snapshot: " + ([.snapshot[] | .channelId + " head=" + (.head.seq // "0") +
            " read_by_all_up_to=" + (.readByAllUpTo // "0") + " members=" + ([.members[]?.userId] | join(","))] | join("; "))
        else
          "update:   " + ([.updates[]? | .userId + " " + .kind + "->" + (.position.seq // "0")] | join(", "))
        end' <<<"$json" | short)"
    done
  else
    grep ' data: ' "$rb_out" | short | sed 's/ data: /ms  /; s/^ */  +/' | cut -c1-200
  fi
  echo
  echo "\$ curl -s '$api/v1/channels/$grp/messages/3/receipts?sender_id=${prefix}bob'"
  rcpt=$(api_call GET "/v1/channels/$grp/messages/3/receipts?sender_id=${prefix}bob")
  if [ "$have_jq" = 1 ]; then
    jq -r 'def at: if . == null then "(no time: log expired)" else (tonumber) as $ms | ($ms / 1000 | floor | strftime("%H:%M:%S")) + "." + ($ms % 1000 + 1000 | tostring | .[1:]) + " UTC" end;
      "  detailed=\(.detailed // false) members=\(.memberCount // 0) read=\(.readCount // 0) delivered=\(.deliveredCount // 0)",
      (.readBy[]? | "  read by       \(.atUnixMs | at)  \(.userId)"),
      (.deliveredTo[]? | "  delivered to  \(.atUnixMs | at)  \(.userId)"),
      (.pending[]? | "  pending                         \(.)")' <<<"$rcpt" | short
  else
    echo "  $(short <<<"$rcpt")"
  fi
  echo "\$ curl -s $api/v1/channels/$grp/ticks"
  ticks=$(api_call GET "/v1/channels/$grp/ticks")
  if [ "$have_jq" = 1 ]; then
    jq -r '"  head=\(.head.seq // 0) delivered_to_all_up_to=\(.deliveredToAllUpTo // 0) read_by_all_up_to=\(.readByAllUpTo // 0)",
      (.members[]? | "\(.userId)\tread=\(if .read then (.read.seq // 0) else "(not shared)" end) delivered=\(if .delivered then (.delivered.seq // 0) else "(not shared)" end)")' <<<"$ticks" |
      short | awk -F'\t' 'NF == 1 { print; next } { printf "  %-6s %s\n", $1, $2 }'
  else
    echo "  $(short <<<"$ticks")"
  fi
  # The smoke test's checks: alice and carol read, dave's reads never shown.
  read_by=$(grep -o '"readBy":\[[^]]*\]' <<<"$rcpt" || true)
  for u in alice carol; do
    grep -q "\"${prefix}$u\"" <<<"$read_by" || die "demo: $u is missing from message 3's read_by: $rcpt"
  done
  # (protojson may put a space after a comma)
  if grep -q "\"${prefix}dave\"" <<<"$read_by" || grep -Eq "\"userId\":\"${prefix}dave\", ?\"kind\":\"READ\"" "$rb_out" ||
    grep -Eq "\"userId\":\"${prefix}dave\", ?\"read\"" <<<"$ticks"; then
    die "demo: dave (share_read_receipts=false) appears in read-by, the watch stream or the ticks"
  fi
  grep -q '"updates"' "$rb_out" || die "demo: the watch stream showed no update; see $run_dir/kafkagate.log"
  echo "dave (share_read_receipts=false): read his messages like the others, yet absent from read_by, the"
  echo "stream's READ updates and the ticks' read cursors; his deliveries still show (share_delivery_receipts)."
  # ---- end read-by ----
fi

if [ "$demo_only" = 1 ]; then
  step "demo done (RUN_DEMO_ONLY): stopping"
  exit 0
fi

cat <<EOF

The stack is running. Try:
  curl -s -X POST $api/v1/receipts:mark -H 'Content-Type: application/json' \\
    -d '{"receipts":[{"user_id":"alice","channel_id":"general","kind":"READ","seq":42,"message_id":"m42"}]}'
  curl -s $api/v1/users/alice/read-state
  bin/receiptsctl load --target $api --rate 20000 --duration 30s --zipf 1.1 --pg-url '$pg_url' --wait-lag
  bin/receiptsctl lag --brokers $brokers
  tail -f $run_dir/*.log
Ctrl-C stops everything.
EOF

# 7. Wait for Ctrl-C, or for a service to die.
while true; do
  for i in "${!pids[@]}"; do
    if ! kill -0 "${pids[i]}" 2>/dev/null; then
      log_tail "${names[i]}"
      die "${names[i]} exited unexpectedly"
    fi
  done
  sleep 1
done
