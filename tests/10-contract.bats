#!/usr/bin/env bats
# API.md part 1 row by row, and the part-2 request keys stdin, timeoutSeconds and details.

load helpers/stack

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

# error_reply STATUS ERROR: the last reply is exactly {"error", "message"} with this error.
error_reply() {
	assert_equal "$code" "$1"
	assert_equal "$(field 'keys_unsorted | join(",")')" "error,message"
	assert_equal "$(field .error)" "$2"
	assert [ -n "$(field .message)" ]
}

@test "contract: a 200 has exactly the eight keys, in order, with their types" {
	execute 'print("hi")'
	assert_equal "$code" 200
	assert_equal "$(field 'keys_unsorted | join(",")')" \
		"status,exitCode,stdout,stderr,result,resultError,durationMs,truncated"
	run -0 jq -e '(.status|type) == "string" and (.exitCode|type) == "number" and
		(.stdout|type) == "string" and (.stderr|type) == "string" and .result == null and
		.resultError == null and (.durationMs|type) == "number" and .durationMs >= 0 and
		(.durationMs|floor) == .durationMs and .truncated == false' <<<"$reply"
	assert_equal "$(header Content-Type)" application/json
}

@test "contract: the café program prints [3.0, 2.0, 5.0] and returns its result" {
	execute_file cafe.py
	assert_equal "$code" 200
	run -0 jq -e '.status == "succeeded" and .exitCode == 0 and .stdout == "[3.0, 2.0, 5.0]\n"
		and .stderr == "" and .result == {"coffee": 3.0, "tea": 2.0, "cake": 5.0}
		and .resultError == null and .truncated == false' <<<"$reply"
}

@test "contract: an uncaught exception is exit code 1 with its traceback on stderr" {
	execute $'def f():\n    raise ValueError("boom")\nf()'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .exitCode)" 1
	run -0 field .stderr
	assert_line 'Traceback (most recent call last):'
	assert_line --partial 'File "/'
	assert_line 'ValueError: boom'
}

@test "contract: sys.exit(3) is exit code 3, status failed" {
	execute 'import sys; print("before"); sys.exit(3)'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .exitCode)" 3
	assert_equal "$(field .stdout)" before
}

@test "contract: killed by signal 9 is exit code -9, details.signal SIGKILL" {
	execute 'import os; os.kill(os.getpid(), 9)' '{details: true}'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .exitCode)" -9
	assert_equal "$(field .details.signal)" SIGKILL
	assert_equal "$(field .details.limitExceeded)" null
}

@test "contract: stdout of exactly maxStdoutBytes is not truncated" {
	execute 'import sys; sys.stdout.write("x" * 65536)'
	run -0 jq -e '.truncated == false and (.stdout|length) == 65536' <<<"$reply"
}

@test "contract: stdout one byte over maxStdoutBytes is truncated to the limit" {
	execute 'import sys; sys.stdout.write("x" * 65537)' '{details: true}'
	run -0 jq -e '.truncated == true and (.stdout|length) == 65536 and
		.details.stdoutBytes == 65537 and .status == "succeeded"' <<<"$reply"
}

@test "contract: invalid UTF-8 and a character cut at the limit become U+FFFD" {
	execute 'import sys; sys.stdout.buffer.write(b"a\xffb\xe2\x82")'
	run -0 jq -e '.stdout == "a\ufffdb\ufffd"' <<<"$reply"
	execute 'import sys; sys.stdout.buffer.write(b"x" * 65535 + "é".encode())'
	run -0 jq -e '.truncated == true and (.stdout|endswith("x\ufffd"))' <<<"$reply"
}

@test "contract: a stderr flood is read and discarded; the run finishes" {
	execute $'import sys\nchunk = "e" * 65536\nfor _ in range(320):\n    sys.stderr.write(chunk)\nprint("done")' \
		'{details: true}'
	run -0 jq -e '.status == "succeeded" and .stdout == "done\n" and .truncated == true and
		(.stderr|length) == 65536 and .details.stderrBytes == 20971520' <<<"$reply"
}

@test "contract: result.json holding JSON comes back parsed" {
	execute $'import json\njson.dump({"n": [1, 2.5, None, True], "s": "é\\u0000", "big": 2**100}, open("result.json", "w"))'
	run -0 jq -e '.result == {"n": [1, 2.5, null, true], "s": "é\u0000", "big": 1267650600228229401496703205376}
		and .resultError == null' <<<"$reply"
	# the big integer is exact in the raw text
	assert_output --partial 'true'
	[[ $reply == *'"big":1267650600228229401496703205376'* ]]
}

@test "contract: no result.json, or JSON null, is result null with no error" {
	execute 'pass'
	run -0 jq -e '.result == null and .resultError == null' <<<"$reply"
	execute 'open("result.json", "w").write("null")'
	run -0 jq -e '.result == null and .resultError == null' <<<"$reply"
}

@test "contract: a symlinked result.json is rejected, never followed" {
	execute 'import os; os.symlink("/etc/passwd", "result.json")'
	assert_equal "$(field .resultError)" "result.json could not be opened (symlinks are rejected)"
	assert_equal "$(field .result)" null
	execute 'import os; open("real.json", "w").write("{}"); os.symlink("real.json", "result.json")'
	assert_equal "$(field .resultError)" "result.json could not be opened (symlinks are rejected)"
}

@test "contract: a directory, a FIFO or a socket named result.json is not a regular file" {
	execute 'import os; os.mkdir("result.json")'
	assert_equal "$code" 200
	assert_equal "$(field .resultError)" "result.json is not a regular file"
	execute 'import os; os.mkfifo("result.json")'
	assert_equal "$(field .resultError)" "result.json is not a regular file"
	# a socket, where seccomp lets a run create one (below Landlock ABI 9 it does not)
	execute $'import os, socket\ntry:\n    socket.socket(socket.AF_UNIX).bind("result.json")\nexcept PermissionError:\n    os.mkfifo("result.json")'
	assert_equal "$(field .resultError)" "result.json is not a regular file"
}

@test "contract: result.json of exactly maxResultBytes is accepted, one more byte is not" {
	execute 'open("result.json", "w").write("\"" + "x" * 65534 + "\"")'
	run -0 jq -e '(.result|length) == 65534 and .resultError == null' <<<"$reply"
	execute 'open("result.json", "w").write("\"" + "x" * 65535 + "\"")'
	assert_equal "$(field .resultError)" "result.json is larger than 65536 bytes"
	execute 'open("result.json", "w").write(" " * 10**8)'
	assert_equal "$(field .resultError)" "result.json is larger than 65536 bytes"
}

@test "contract: invalid JSON, NaN, Infinity, a BOM, invalid UTF-8 and deep nesting are not valid JSON" {
	local prog
	for prog in \
		'open("result.json", "w").write("{\"a\": ")' \
		'open("result.json", "w").write("[NaN]")' \
		'open("result.json", "w").write("{\"x\": Infinity}")' \
		'open("result.json", "wb").write(b"\xef\xbb\xbf{}")' \
		'open("result.json", "wb").write(b"\"\xff\"")' \
		'open("result.json", "w").write("[" * 30000 + "]" * 30000)' \
		'open("result.json", "w").write("")'; do
		execute "$prog"
		assert_equal "$(field .resultError)" "result.json is not valid JSON"
		assert_equal "$(field .result)" null
	done
}

@test "contract: a failed or timed-out run still returns its result" {
	execute 'open("result.json", "w").write("[1]"); raise SystemExit(2)'
	run -0 jq -e '.status == "failed" and .exitCode == 2 and .result == [1]' <<<"$reply"
	execute $'open("result.json", "w").write("[2]")\nimport time\ntime.sleep(60)' '{timeoutSeconds: 1}'
	run -0 jq -e '.status == "timed_out" and .exitCode == null and .result == [2]' <<<"$reply"
}

@test "contract: 400 invalid_request for bodies that are not {\"code\": non-empty string}" {
	local body
	for body in 'not json' '[1]' '"code"' '{}' '{"code":1}' '{"code":""}' '{"code":null}' \
		'{"code":"\ud800"}' '{"code":"print(1)","shell":true}' \
		'{"code":"x","stdin":5}' '{"code":"x","timeoutSeconds":0}' \
		'{"code":"x","timeoutSeconds":31}' '{"code":"x","timeoutSeconds":"1"}' \
		'{"code":"x","details":"yes"}'; do
		post "$body"
		error_reply 400 invalid_request
	done
	post '{"code":"print(1)","shell":true}'
	refute [ "$(field .message)" == "" ]
	[[ $(field .message) != *print* ]]
}

@test "contract: a body that is not valid UTF-8 is 400" {
	request --data-binary @- "$BASE/execute" < <(printf '{"code":"print(1)\xff"}')
	error_reply 400 invalid_request
}

@test "contract: code of exactly maxCodeBytes runs; one byte more is 400 with the limit in the message" {
	local pad
	pad=$(head -c 65535 /dev/zero | tr '\0' 'a')
	execute "#$pad"
	assert_equal "$code" 200
	assert_equal "$(field .status)" succeeded
	execute "#a$pad"
	error_reply 400 invalid_request
	assert_equal "$(field .message)" "code must be at most 65536 bytes"
	# the limit counts UTF-8 bytes: "#", 32767 "a" and 16384 "é" are exactly 65536 bytes
	local half
	half="#$(head -c 32767 /dev/zero | tr '\0' 'a')$(printf 'é%.0s' {1..16384})"
	execute "$half"
	assert_equal "$code" 200
	execute "${half}é"
	error_reply 400 invalid_request
}

@test "contract: a body over client_max_body_size is 413 request_too_large" {
	head -c 2000000 /dev/zero | tr '\0' 'a' >"$BATS_TEST_TMPDIR/big"
	request --data-binary @"$BATS_TEST_TMPDIR/big" "$BASE/execute"
	error_reply 413 request_too_large
}

@test "contract: a maximal code after JSON escaping is admitted (not 413)" {
	# 65536 bytes of quotes: each is escaped to two bytes, 131072 + in the body
	body=$(jq -cn --arg code "$(head -c 65535 /dev/zero | tr '\0' '"')" '{code: ("#" + $code)}')
	post "$body"
	assert_equal "$code" 200
}

@test "contract: 404 not_found for unknown paths" {
	local p
	for p in /nope /execute/ /execute/x /capabilities.json /; do
		request "$BASE$p"
		error_reply 404 not_found
	done
}

@test "contract: 405 method_not_allowed with Allow for a wrong method on a known path" {
	request "$BASE/execute"
	error_reply 405 method_not_allowed
	assert_equal "$(header Allow)" POST
	assert [ -n "$(header X-Request-Id)" ]
	request -X POST "$BASE/capabilities"
	error_reply 405 method_not_allowed
	assert_equal "$(header Allow)" GET
	request -X DELETE "$BASE/healthz"
	error_reply 405 method_not_allowed
	assert_equal "$(header Allow)" GET
}

@test "contract: stdin is fed to the program; without it stdin is empty" {
	execute 'import sys; print(sys.stdin.read()[::-1])' '{stdin: "abc\ndef"}'
	assert_equal "$(field .stdout)" $'fed\ncba'
	execute 'import sys; print(repr(sys.stdin.read()))'
	assert_equal "$(field .stdout)" "''"
	execute 'input()'
	assert_equal "$(field .exitCode)" 1
	run -0 field .stderr
	assert_line 'EOFError: EOF when reading a line'
}

@test "contract: stdin longer than maxStdinBytes is 400" {
	body=$(jq -cn --arg s "$(head -c 65537 /dev/zero | tr '\0' 'a')" '{code: "pass", stdin: $s}')
	post "$body"
	error_reply 400 invalid_request
}

@test "contract: timeoutSeconds shortens the wall-clock limit" {
	local start=$SECONDS
	execute $'import time\nprint("started", flush=True)\ntime.sleep(30)' '{timeoutSeconds: 0.5, details: true}'
	run -0 jq -e '.status == "timed_out" and .exitCode == null and .stdout == "started\n" and
		.details.limitExceeded == "time" and .details.signal == "SIGKILL" and
		.durationMs >= 500 and .durationMs < 5000' <<<"$reply"
	((SECONDS - start < 10))
}

@test "contract: details adds exactly one ninth key with the documented fields" {
	execute 'x = bytearray(50 * 1024 * 1024); print("ok")' '{details: true}'
	assert_equal "$(field 'keys_unsorted | join(",")')" \
		"status,exitCode,stdout,stderr,result,resultError,durationMs,truncated,details"
	assert_equal "$(field '.details | keys_unsorted | join(",")')" \
		"requestId,signal,limitExceeded,cpuMs,maxRssBytes,stdoutBytes,stderrBytes"
	run -0 jq -e '.details.maxRssBytes > 50 * 1024 * 1024 and .details.cpuMs >= 0 and
		.details.stdoutBytes == 3 and .details.stderrBytes == 0 and .details.signal == null' <<<"$reply"
	execute 'pass' '{details: false}'
	assert_equal "$(field 'has("details")')" false
}
