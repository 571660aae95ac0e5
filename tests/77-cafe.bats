#!/usr/bin/env bats
# The scripted café agent: reads /tool, calls the tool, answers from the result.

load helpers/stack

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

@test "cafe: the scripted agent reads /tool, runs the program and answers" {
	run -0 "$ROOT/scripts/cafe-agent" "$BASE"
	assert_line --index 0 --partial 'system:      tool available: code_executor'
	assert_line --partial 'tool_use:    code_executor {"code":"import json'
	assert_line --regexp '^tool_result: \{"status":"succeeded".*"result":\{"coffee":3\.0,"tea":2\.0,"cake":5\.0\}'
	assert_line --index -1 'coffee 3.00, tea 2.00, cake 5.00'
}

@test "cafe: the agent fails clearly when the service is down" {
	run -1 "$ROOT/scripts/cafe-agent" "http://127.0.0.1:$(free_port)"
	assert_output --partial "GET http://127.0.0.1:"
	assert_output --partial "/tool failed"
	run -2 "$ROOT/scripts/cafe-agent"
	assert_output --partial usage
}
