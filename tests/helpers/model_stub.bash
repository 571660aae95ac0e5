# shellcheck shell=bash
# A stand-in for a model's API (tests/helpers/model_stub.py) on a free loopback port, for
# scripts/cafe-agent's real loop. Load after helpers/stack (it reads $BASE, $PY, $ROOT).

# stub_start API [STUB-ARGS...]: starts the stub as API's (anthropic or openai), expecting the
# tool GET /tool serves that API (the agent's form: OpenAI's strict one); STUB-ARGS go to the
# stub (--fail 401, or --tool FILE in place of it). Waits until it listens: the stub writes its
# port into a FIFO once bound, and the read is bounded (10 s). Sets STUB_PID, STUB_URL, STUB_LOG.
stub_start() {
	local api=$1 dir fd port="" query=""
	shift
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/stub.XXXXXX")
	[[ $api == openai ]] && query='?format=openai&strict=true'
	curl -sf --max-time 30 "$BASE/tool$query" >"$dir/tool.json"
	mkfifo "$dir/ready"
	"$PY" "$ROOT/tests/helpers/model_stub.py" --api "$api" --tool "$dir/tool.json" \
		--ready "$dir/ready" "$@" 2>"$dir/stub.log" 3>&- &
	STUB_PID=$!
	STUB_LOG=$dir/stub.log
	# opened read-write, the FIFO never blocks the open; only the read waits, bounded
	exec {fd}<>"$dir/ready"
	read -r -t 10 -u "$fd" port || true
	exec {fd}<&-
	if [[ ! $port =~ ^[0-9]+$ ]]; then
		echo "the model stub did not start:" >&2
		cat "$STUB_LOG" >&2
		return 1
	fi
	STUB_URL="http://127.0.0.1:$port"
	export STUB_PID STUB_URL STUB_LOG
}

# stub_stop: stops the stub stub_start started, if any.
stub_stop() {
	[[ -n ${STUB_PID:-} ]] || return 0
	kill -TERM "$STUB_PID" 2>/dev/null || true
	wait "$STUB_PID" 2>/dev/null || true
	STUB_PID=""
}

# agent [ENV...]: scripts/cafe-agent against $BASE, with no key, base URL or setting of the
# caller's (never the network), and the NAME=VALUE settings given.
agent() {
	env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u ANTHROPIC_BASE_URL -u OPENAI_BASE_URL \
		-u CAFE_AGENT_API -u CAFE_AGENT_MODEL -u CAFE_AGENT_MAX_TURNS -u CAFE_AGENT_TIMEOUT \
		"$@" "$ROOT/scripts/cafe-agent" "$BASE"
}
