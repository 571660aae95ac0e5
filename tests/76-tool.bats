#!/usr/bin/env bats
# GET /tool: the tool definition is written from the live /capabilities and /isolation, so
# every number in it is a number the sandbox enforces. The stack runs with limits unlike the
# defaults, to show that nothing is hand-written.

load helpers/stack

setup_file() {
	local conf
	conf=$(conf_variant 's/CODEBOX_EXECUTION_TIMEOUT_SECONDS  30;/CODEBOX_EXECUTION_TIMEOUT_SECONDS  12;/' \
		's/CODEBOX_MAX_STDOUT_BYTES           65536;/CODEBOX_MAX_STDOUT_BYTES           4321;/' \
		's/CODEBOX_MAX_STDIN_BYTES            65536;/CODEBOX_MAX_STDIN_BYTES            5432;/' \
		's/CODEBOX_MEMORY_BYTES               1073741824;/CODEBOX_MEMORY_BYTES               805306368;/' \
		's/CODEBOX_MAX_PROCESSES              64;/CODEBOX_MAX_PROCESSES              48;/' \
		's/CODEBOX_DISK_BYTES                 67108864;/CODEBOX_DISK_BYTES                 50331648;/')
	stack_start --conf-dir "$conf"
}

teardown_file() {
	stack_stop
}

# The /isolation limits a model is told: all of them, but a process or CPU limit where this
# host enforces none (/isolation's details say so)
told_limits() { # ISOLATION
	jq -r --argjson i "$1" '(.limits | to_entries[] |
		select(.key != "maxProcesses" or $i.details.processLimit != "none") |
		select(.key != "cpuMillicores" or $i.details.cpuLimit != "none") | .value),
		(.sessions // {} | .maxSessions | values)' <<<"$1"
}

# strict_violations SCHEMA: what breaks OpenAI's strict-mode rules in SCHEMA (tool.c's top
# comment cites them), one a line: a keyword outside the subset; an object that is not closed
# (additionalProperties false) or does not require exactly its properties. Walks properties,
# items and anyOf.
strict_violations() {
	jq -r '
		["type", "description", "properties", "required", "additionalProperties", "items",
		 "anyOf", "enum", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
		 "multipleOf", "minItems", "maxItems", "pattern", "format"] as $allowed |
		def walk_schema($path):
			((keys - $allowed)[] | "\($path): the keyword \(.)"),
			(if ([.type] | flatten | index("object")) != null or has("properties") then
				(if .additionalProperties != false then "\($path): open" else empty end),
				(if ((.required // []) | sort) != ((.properties // {}) | keys)
				 then "\($path): does not require exactly its properties" else empty end),
				((.properties // {}) | to_entries[] | .key as $k | .value | walk_schema("\($path).\($k)"))
			 else empty end),
			(if has("items") then .items | walk_schema("\($path)[]") else empty end),
			(if has("anyOf") then .anyOf | to_entries[] | .key as $k | .value | walk_schema("\($path)|\($k)")
			 else empty end);
		walk_schema("parameters")' <<<"$1"
}

@test "tool: the Anthropic form names every module, limit and sentence of /capabilities and /isolation" {
	local caps iso tool desc
	caps=$(curl -s "$BASE/capabilities")
	iso=$(curl -s "$BASE/isolation")
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
	# every limit as a number: /capabilities' and /isolation's (memory, processes, disk, stdin,
	# CPU, and the files' and artifacts' bounds once /execute has them); and every number is a
	# limit or part of a version
	for v in $(jq -r '.limits[]' <<<"$caps") $(told_limits "$iso"); do
		[[ $desc =~ (^|[^0-9.])$v([^0-9.]|$) ]] || fail "the description lacks the limit $v"
	done
	local allowed n desc_words
	allowed=" $(jq -r '.limits[]' <<<"$caps" | tr '\n' ' ')$(told_limits "$iso" | tr '\n' ' ')"
	desc_words=${desc//UTF-8/}
	for n in $(grep -oE '(^|[^0-9.])[0-9]+([^0-9.]|$)' <<<"${desc_words//Base64/}" | tr -cd '0-9\n'); do
		[[ $allowed == *" $n "* ]] || fail "the description holds $n, which is no limit"
	done
	[[ $desc == *"12 seconds"* && $desc == *"4321 bytes"* && $desc == *"stdin at most 5432 bytes"* ]]
	[[ $desc == *"805306368 bytes of memory"* && $desc == *"48 processes"* && $desc == *"50331648 bytes"* ]]
	# nothing meant for HTTP clients: a model cannot retry a request
	[[ $desc != *429* && $desc != *HTTP* && $desc != *[Rr]etry* ]] || fail "the description speaks HTTP: $desc"
	# the response shape: the eight keys of /execute
	for k in status exitCode stdout stderr result resultError durationMs truncated; do
		[[ $desc == *"\"$k\""* ]] || fail "the description lacks the key $k"
	done
	# the schema: what /execute accepts from a model (not details, for HTTP clients), its
	# timeout bounded by the live limit; files and artifacts exactly when /isolation has their
	# bounds (POST /execute takes them)
	run -0 jq -e --argjson t "$(jq .limits.executionTimeoutSeconds <<<"$caps")" \
		'.input_schema.required == ["code"] and .input_schema.additionalProperties == false and
		 .input_schema.properties.timeoutSeconds.maximum == $t and
		 .input_schema.properties.stdin.type == "string" and
		 (.input_schema.properties | has("details") | not)' <<<"$tool"
	# and "session" exactly when /isolation has sessions (warm)
	run -0 jq -e --argjson i "$iso" '.input_schema.properties | keys - ["artifacts", "files"] ==
		(["code", "stdin", "timeoutSeconds"] + (if $i.sessions then ["session"] else [] end) | sort) and
		has("files") == ($i.limits | has("maxInputFiles") and has("maxInputBytes")) and
		has("artifacts") == ($i.limits | has("maxArtifacts") and has("maxArtifactBytes"))' <<<"$tool"
}

@test "tool: ?format=openai is the same tool in OpenAI's form, its description within 1024 characters" {
	local a o
	a=$(curl -s "$BASE/tool")
	o=$(curl -s "$BASE/tool?format=openai")
	run -0 jq -e --argjson a "$a" '.type == "function" and .function.name == $a.name and
		(.function | has("strict") | not)' <<<"$o"
	# OpenAI refuses a longer one: the sentences that fit, the rest at the end of the code's
	# description; nothing lost, the schema otherwise Anthropic's
	run -0 jq -e --argjson a "$a" '.function as $f | ($f.description | length) <= 1024 and
		($f.parameters.properties.code.description | split(" About the sandbox, continued: ")) as $c |
		(if ($c | length) == 2 then $f.description + " " + $c[1] else $f.description end) == $a.description and
		($f.parameters | .properties.code.description = $a.input_schema.properties.code.description) ==
		$a.input_schema' <<<"$o"
	run -0 curl -s -w ' %{http_code}' "$BASE/tool?format=yaml"
	assert_output '{"error":"invalid_request","message":"format must be anthropic (the default) or openai"} 400'
}

@test "tool: ?format=openai&strict=true keeps OpenAI's strict-mode rules, in any order of the query" {
	local o s
	o=$(curl -s "$BASE/tool?format=openai")
	s=$(curl -s "$BASE/tool?format=openai&strict=true")
	assert_equal "$(curl -s "$BASE/tool?strict=true&format=openai")" "$s"
	run -0 jq -e '.type == "function" and .function.strict == true and
		(.function.description | length) <= 1024' <<<"$s"
	run -0 strict_violations "$(jq .function.parameters <<<"$s")"
	assert_output ''
	# every key required, the optional ones nullable; the root a plain object
	run -0 jq -e '.function.parameters | .type == "object" and (has("anyOf") | not) and
		(.properties | to_entries | all(if .key == "code" then .value.type == "string"
		 else (.value.type | type) == "array" and (.value.type | index("null")) != null end))' <<<"$s"
	# the same keys and descriptions as the plain form
	run -0 jq -e --argjson o "$o" '.function.description == $o.function.description and
		(.function.parameters.properties | keys) == ($o.function.parameters.properties | keys)' <<<"$s"
	# the walk can fail: the plain form is not strict (optional keys are not required)
	run -0 strict_violations "$(jq .function.parameters <<<"$o")"
	assert_output --partial 'parameters: does not require exactly its properties'
	run -0 strict_violations "$(jq '.function.parameters | .properties.stdin.maxLength = 3' <<<"$s")"
	assert_output 'parameters.stdin: the keyword maxLength'
}

@test "tool: a bad query is a 400 that says what is wrong" {
	local q
	for q in 'strict=true' 'format=anthropic&strict=true'; do
		run -0 curl -s -w ' %{http_code}' "$BASE/tool?$q"
		assert_output --partial 'use it with format=openai'
		assert_output --partial '"error":"invalid_request"'
		assert_output --regexp ' 400$'
	done
	run -0 curl -s -w ' %{http_code}' "$BASE/tool?format=openai&strict=yes"
	assert_output '{"error":"invalid_request","message":"strict must be true or false"} 400'
	run -0 curl -s -w ' %{http_code}' "$BASE/tool?format=openai&pretty=1"
	assert_output '{"error":"invalid_request","message":"unknown query parameter: /tool takes format (anthropic or openai) and strict (true or false)"} 400'
	run -0 curl -s -w ' %{http_code}' "$BASE/tool?format=openai&format=openai"
	assert_output '{"error":"invalid_request","message":"format is given twice"} 400'
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/tool?strict=false"
	assert_output 200
}

@test "tool: a call giving every key of the schema is accepted by /execute as it stands" {
	local tool extra
	tool=$(curl -s "$BASE/tool")
	# every property the schema offers, each with a value it allows
	extra=$(jq -c '.input_schema.properties as $p | {stdin: "6", timeoutSeconds: $p.timeoutSeconds.maximum} +
		(if $p | has("files") then {files: [{path: "seven.txt", content: "7"}]} else {} end) +
		(if $p | has("artifacts") then {artifacts: false} else {} end)' <<<"$tool")
	execute 'import os
print(int(input()) * int(open("seven.txt").read()) if os.path.exists("seven.txt") else 6 * 7)' "$extra"
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
}

# POST /execute takes null as an absent optional key (a server before 598d204 refuses it: 400)
@test "tool: the strict form's call, with null for every optional key, is accepted by /execute" {
	local tool body
	tool=$(curl -s "$BASE/tool?format=openai&strict=true")
	# what a model in strict mode sends: every key, null for those it does not use
	body=$(jq -c '.function.parameters.properties | with_entries(.value = null) |
		.code = "print(6 * 7)"' <<<"$tool")
	[[ $(jq 'length' <<<"$body") -ge 3 ]]
	post "$body"
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
	assert_equal "$(field .status)" succeeded
}
