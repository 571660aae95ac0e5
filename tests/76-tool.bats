#!/usr/bin/env bats
# GET /tool: the tool definition is written from the live /capabilities, so every number in
# it is a number the sandbox enforces. The stack runs with limits unlike the defaults, to show
# that nothing is hand-written.

load helpers/stack

setup_file() {
	local conf
	conf=$(conf_variant 's/CODEBOX_EXECUTION_TIMEOUT_SECONDS  30;/CODEBOX_EXECUTION_TIMEOUT_SECONDS  12;/' \
		's/CODEBOX_MAX_STDOUT_BYTES           65536;/CODEBOX_MAX_STDOUT_BYTES           4321;/')
	stack_start --conf-dir "$conf"
}

teardown_file() {
	stack_stop
}

@test "tool: the Anthropic form names every module, limit and sentence of /capabilities" {
	local caps tool desc
	caps=$(curl -s "$BASE/capabilities")
	tool=$(curl -s "$BASE/tool")
	run -0 jq -e 'keys == ["description", "input_schema", "name"] and .name == "code_executor"' <<<"$tool"
	desc=$(jq -r .description <<<"$tool")
	# every module with its version
	while read -r dist version; do
		[[ $desc == *"$dist $version"* ]] || fail "the description lacks $dist $version"
	done < <(jq -r '.modules[] | "\(.distribution) \(.version)"' <<<"$caps")
	[[ $desc == *"Python $(jq -r .pythonVersion <<<"$caps")"* ]]
	# the three sentences, verbatim
	for k in network persistence structuredResult; do
		[[ $desc == *"$(jq -r ".$k" <<<"$caps")"* ]] || fail "the description lacks the $k sentence"
	done
	# every limit as a number; and every number is a limit or part of a version
	for v in $(jq -r '.limits[]' <<<"$caps"); do
		[[ $desc =~ (^|[^0-9.])$v([^0-9.]|$) ]] || fail "the description lacks the limit $v"
	done
	local allowed n
	allowed=" $(jq -r '[.limits[]] + [429] | map(tostring) | join(" ")' <<<"$caps") "
	for n in $(grep -oE '(^|[^0-9.])[0-9]+([^0-9.]|$)' <<<"${desc//UTF-8/}" | tr -cd '0-9\n'); do
		[[ $allowed == *" $n "* ]] || fail "the description holds $n, which is no limit"
	done
	[[ $desc == *"12 seconds"* && $desc == *"4321 bytes"* ]]
	# the response shape: the eight keys of /execute
	for k in status exitCode stdout stderr result resultError durationMs truncated; do
		[[ $desc == *"\"$k\""* ]] || fail "the description lacks the key $k"
	done
	# the schema: what /execute accepts, its timeout bounded by the live limit
	run -0 jq -e --argjson t "$(jq .limits.executionTimeoutSeconds <<<"$caps")" \
		'.input_schema.required == ["code"] and .input_schema.additionalProperties == false and
		 .input_schema.properties.timeoutSeconds.maximum == $t' <<<"$tool"
}

@test "tool: ?format=openai is the same tool in OpenAI's form" {
	local a o
	a=$(curl -s "$BASE/tool")
	o=$(curl -s "$BASE/tool?format=openai")
	run -0 jq -e --argjson a "$a" '.type == "function" and .function.name == $a.name and
		.function.description == $a.description and .function.parameters == $a.input_schema' <<<"$o"
	run -0 curl -s -w ' %{http_code}' "$BASE/tool?format=yaml"
	assert_output '{"error":"invalid_request","message":"format must be anthropic (the default) or openai"} 400'
}

@test "tool: the schema's call is accepted by /execute as it stands" {
	local tool
	tool=$(curl -s "$BASE/tool")
	execute 'print(6 * 7)' "{timeoutSeconds: $(jq .input_schema.properties.timeoutSeconds.maximum <<<"$tool")}"
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
}
