#!/usr/bin/env bats
# The café agent (scripts/cafe-agent): reads /tool, gives it to a model, runs the model's tool
# calls on /execute, answers from the result. Without a key a scripted model speaks the APIs'
# shapes; with one, the real loop talks to the API, here a local stand-in that checks every
# request as the API would (tests/helpers/model_stub.py): no network.

load helpers/stack
load helpers/model_stub

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

teardown() {
	stub_stop
	if [[ ${BATS_TEST_COMPLETED:-} != 1 && -n ${STUB_LOG:-} ]]; then
		echo "--- model stub"
		cat "$STUB_LOG"
	fi
	stack_teardown
}

# the transcript of a café run that got its answer from the program's result.json
assert_cafe_solved() {
	assert_line --index 0 --partial 'system:      tool available: code_executor'
	assert_line --partial 'tool_use:    code_executor {"code":"# The café problem: three orders'
	assert_line --regexp '^tool_result: \{"status":"succeeded".*"result":\{"coffee":3\.0,"tea":2\.0,"cake":5\.0\}'
	assert_line --index -1 'coffee 3.00, tea 2.00, cake 5.00'
}

@test "cafe: the scripted agent reads /tool, runs the program and answers" {
	run -0 agent
	assert_cafe_solved
	assert_line 'system:      model: scripted (no API key), in the shapes of the Anthropic Messages API'
	assert_line --partial "(GET $BASE/tool)"
}

@test "cafe: the scripted agent speaks OpenAI's shapes too, with the strict form's null arguments" {
	run -0 agent CAFE_AGENT_API=openai
	assert_cafe_solved
	assert_line 'system:      model: scripted (no API key), in the shapes of the OpenAI Chat Completions API'
	assert_line --partial "(GET $BASE/tool?format=openai&strict=true)"
	assert_line --partial '"stdin":null'
}

@test "cafe: with ANTHROPIC_API_KEY the agent runs the Messages API's loop (a local stand-in)" {
	stub_start anthropic
	run -0 agent ANTHROPIC_API_KEY=test ANTHROPIC_BASE_URL="$STUB_URL" CAFE_AGENT_MODEL=claude-stub
	assert_cafe_solved
	assert_line "system:      model: claude-stub, Anthropic Messages API at $STUB_URL/v1/messages"
	# the tool call and the answer are the stand-in's, not the scripted model's
	assert_line 'assistant:   stub: I will run the café program.'
	assert_line --partial 'print(\"solved\")'
	run -0 cat "$STUB_LOG"
	assert_output $'stub: request 1: turn 1 answered\nstub: request 2: turn 2 answered'
}

@test "cafe: with OPENAI_API_KEY the agent runs the Chat Completions loop (a local stand-in)" {
	stub_start openai
	run -0 agent OPENAI_API_KEY=test OPENAI_BASE_URL="$STUB_URL"
	assert_cafe_solved
	assert_line "system:      model: gpt-4.1-mini, OpenAI Chat Completions API at $STUB_URL/v1/chat/completions"
	# strict mode: the model sends every key, null for those it does not use; the run succeeded
	assert_line --partial '"timeoutSeconds":null'
	assert_line --partial 'print(\"solved\")'
	run -0 cat "$STUB_LOG"
	assert_output $'stub: request 1: turn 1 answered\nstub: request 2: turn 2 answered'
}

@test "cafe: an API error ends the agent with its status and the API's message" {
	stub_start anthropic --fail 401
	run -1 agent ANTHROPIC_API_KEY=test ANTHROPIC_BASE_URL="$STUB_URL"
	assert_line --index -1 "cafe-agent: POST $STUB_URL/v1/messages failed: HTTP 401: invalid x-api-key"
	stub_stop
	stub_start openai
	run -1 agent OPENAI_API_KEY=wrong OPENAI_BASE_URL="$STUB_URL"
	assert_line --index -1 --partial "cafe-agent: POST $STUB_URL/v1/chat/completions failed: HTTP 401: Incorrect API key provided"
}

@test "cafe: the stand-in refuses a request that is not the API's shape (a tool other than /tool's)" {
	local stale="$BATS_TEST_TMPDIR/stale-tool.json"
	curl -s "$BASE/tool" | jq '.description = "a tool definition of another day"' >"$stale"
	stub_start anthropic --tool "$stale"
	run -1 agent ANTHROPIC_API_KEY=test ANTHROPIC_BASE_URL="$STUB_URL"
	assert_line --index -1 --partial 'HTTP 400: stub: tools must be exactly'
}

@test "cafe: the agent fails clearly when the service is down" {
	run -1 "$ROOT/scripts/cafe-agent" "http://127.0.0.1:$(free_port)"
	assert_output --partial "GET http://127.0.0.1:"
	assert_output --partial "/tool failed"
	run -2 "$ROOT/scripts/cafe-agent"
	assert_output --partial usage
}
