#!/usr/bin/env bats
# Files in and out of POST /execute: "files" are written into the run's directory before it
# starts, and "artifacts": true brings back what the program created or changed there. Both
# tiers warm (a light program, a heavy one) and cold (the cold pass runs this file too).

load helpers/stack
load helpers/mcp

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

# the inputs of most tests: a text file, a nested binary one, a CSV
inputs='[{"path": "notes.txt", "content": "café\n"},
         {"path": "data/raw/bytes.bin", "contentBase64": "AAEC/w=="},
         {"path": "data/prices.csv", "content": "item,price\ncoffee,3\ntea,2\ncake,5\n"}]'

@test "files: inputs are in the working directory before the program starts, as sent" {
	local prog
	prog='import hashlib, os
print(sorted(os.listdir(".")), sorted(os.listdir("data")), os.listdir("data/raw"))
print(open("notes.txt", encoding="utf-8").read().strip())
print(open("data/raw/bytes.bin", "rb").read().hex())
print(sum(int(l.split(",")[1]) for l in open("data/prices.csv").read().splitlines()[1:]))
print(oct(os.stat("notes.txt").st_mode & 0o777), oct(os.stat("data").st_mode & 0o777))'
	for program in "$prog" "import numpy
$prog"; do
		execute "$program" "{files: $inputs}"
		assert_equal "$code" 200
		assert_equal "$(field .status)" succeeded
		assert_equal "$(field .stdout)" "['data', 'main.py', 'notes.txt'] ['prices.csv', 'raw'] ['bytes.bin']
café
000102ff
10
0o600 0o700"
		# without artifacts: true, the lab's eight keys, nothing more
		run -0 jq -e 'keys == ["durationMs","exitCode","result","resultError","status","stderr","stdout","truncated"]' <<<"$reply"
	done
}

@test "files: artifacts are the files the program created or changed, with their type, size and content" {
	local prog
	prog='import json, os
os.makedirs("out/deep")
open("out/deep/table.csv", "w").write("x,y\n1,2\n3,4\n")
open("chart.svg", "w").write("<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
open("picture.png", "wb").write(b"\x89PNG\r\n\x1a\n" + bytes(100))
open("notes.txt", "a").write("more\n")
json.dump({"ok": True}, open("summary.json", "w"))
open("raw.bin", "wb").write(bytes(range(256)))
open("/tmp/elsewhere.txt", "w").write("not in the working directory")
json.dump(1, open("result.json", "w"))'
	execute "$prog" "{files: $inputs, artifacts: true}"
	assert_equal "$code" 200
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .result)" 1
	run -0 jq -c '[.artifacts[] | [.path, .mimeType, .bytes, .omitted]]' <<<"$reply"
	assert_output '[["chart.svg","image/svg+xml",63,null],["notes.txt","text/plain",11,null],["out/deep/table.csv","text/csv",12,null],["picture.png","image/png",108,null],["raw.bin","application/octet-stream",256,null],["summary.json","application/json",12,null]]'
	# the content, byte for byte
	assert_equal "$(jq -r '.artifacts[] | select(.path == "notes.txt") | .contentBase64' <<<"$reply" | base64 -d)" "café
more"
	assert_equal "$(jq -r '.artifacts[] | select(.path == "raw.bin") | .contentBase64' <<<"$reply" | base64 -d | sha256sum)" \
		"$(python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)))' | sha256sum)"
	# the keys: the lab's eight, then artifacts
	run -0 jq -c 'keys_unsorted' <<<"$reply"
	assert_output '["status","exitCode","stdout","stderr","result","resultError","durationMs","truncated","artifacts"]'
	# with details, details comes before artifacts
	execute 'print(1)' '{details: true, artifacts: true}'
	run -0 jq -c '[keys_unsorted[-2:], .artifacts]' <<<"$reply"
	assert_output '[["details","artifacts"],[]]'
}

@test "files: a failed or timed-out program still returns what it wrote" {
	execute 'open("partial.txt", "w").write("half"); raise SystemExit(3)' '{artifacts: true}'
	assert_equal "$(field .exitCode)" 3
	assert_equal "$(jq -c '[.artifacts[] | .path]' <<<"$reply")" '["partial.txt"]'
	execute 'import time
open("before.txt", "w").write("x")
time.sleep(60)' '{artifacts: true, timeoutSeconds: 1}'
	assert_equal "$(field .status)" timed_out
	assert_equal "$(jq -c '[.artifacts[] | .path]' <<<"$reply")" '["before.txt"]'
}

@test "files: bad inputs are a 400 that names the file and why" {
	local body
	check() { # check FILES-JSON MESSAGE
		body=$(jq -cn --argjson f "$1" '{code: "print(1)", files: $f}')
		post "$body"
		assert_equal "$code" 400
		assert_equal "$(field .error)" invalid_request
		assert_equal "$(field .message)" "$2"
	}
	check '{}' 'files must be an array of at most 100 objects {"path": "<relative path>", "content": "<text>"} or {"path", "contentBase64"} (files: list_type)'
	check '[{"path": "/etc/passwd", "content": "x"}]' 'a file'"'"'s path must be relative, with no empty, "." or ".." component and no control character (files[0].path: value_error)'
	check '[{"path": "ok.txt", "content": "x"}, {"path": "a/../../x", "content": "x"}]' 'a file'"'"'s path must be relative, with no empty, "." or ".." component and no control character (files[1].path: value_error)'
	check '[{"path": "main.py", "content": "x"}]' 'a file'"'"'s path names main.py or result.json, which the sandbox writes and reads (files[0].path: value_error)'
	check '[{"path": "a", "contentBase64": "not base64"}]' 'a file'"'"'s contentBase64 must be padded base64 (RFC 4648) (files[0].contentBase64: value_error)'
	check '[{"path": "a", "content": "x", "mode": 7}]' 'a file has the keys path and content or contentBase64 (files[0].mode: extra_forbidden)'
	check '[{"path": "a", "content": "x"}, {"path": "a/b", "content": "y"}]' 'a file'"'"'s path is files[0]'"'"'s, or a directory of it, or below it (files[1].path: value_error)'
	post '{"code": "print(1)", "artifacts": "yes"}'
	assert_equal "$(field .message)" 'artifacts must be true or false (artifacts: bool_type)'
	# null is the key left out (OpenAI's strict tool schemas send it)
	post '{"code": "print(1)", "stdin": null, "timeoutSeconds": null, "details": null, "files": null, "artifacts": null}'
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 1
	run -0 jq -e 'has("artifacts") | not' <<<"$reply"
}

@test "files: inputs are bounded by the body limit (413, named) and half the run's disk (/isolation)" {
	local disk
	disk=$(curl -s "$BASE/isolation" | jq .limits.diskBytes)
	assert_equal "$(curl -s "$BASE/isolation" | jq .limits.maxInputBytes)" $((disk / 2))
	# the body limit comes first by default (1 MiB < 32 MiB): nginx's 413 names it
	head -c 2000000 /dev/zero | base64 -w0 | jq -Rc '{code: "print(1)", files: [{path: "big", contentBase64: .}]}' >"$BATS_TEST_TMPDIR/big.json"
	run -0 curl -s -w ' %{http_code}' -H 'Content-Type: application/json' --data-binary "@$BATS_TEST_TMPDIR/big.json" "$BASE/execute"
	assert_output --regexp '"message":"the request body is larger than this server accepts \(at most [0-9]+ bytes\)"\} 413$'
}

@test "files: attacks on the way out: no symlink followed, no FIFO opened, bounds kept, and the service is fine" {
	local prog
	prog='import os
os.symlink("/etc/shadow", "shadow")
os.symlink("/proc/1/environ", "environ")
os.symlink("..", "up")
os.mkfifo("fifo")
os.mkdir("loop")
os.symlink("../loop", "loop/again")
os.link("main.py", "hardlink.py")
with open("huge.bin", "wb") as f:
    f.truncate(9 * 1024 * 1024)
for i in range(40):
    open("many-%02d.txt" % i, "w").write("m")
os.makedirs("/".join(["d"] * 30))
open("/".join(["d"] * 30) + "/deep.txt", "w").write("deep")
os.chmod("many-00.txt", 0)'
	execute "$prog" '{artifacts: true}'
	assert_equal "$(field .status)" succeeded
	# only regular files, never through a link
	run -0 jq -c '[.artifacts[] | .path | select(test("shadow|environ|up|fifo|loop|deep"))]' <<<"$reply"
	assert_output '[]'
	# a hard link to main.py is a regular file of the run's own: it holds the program
	assert_equal "$(jq -r '.artifacts[] | select(.path == "hardlink.py") | .contentBase64' <<<"$reply" | base64 -d)" "$prog"
	# too large: listed with its size and why, no content
	run -0 jq -c '.artifacts[] | select(.path == "huge.bin") | [.bytes, .contentBase64, .omitted]' <<<"$reply"
	assert_output '[9437184,null,"larger than maxArtifactBytes"]'
	# at most maxArtifacts with content; the rest listed
	assert_equal "$(jq '[.artifacts[] | select(.contentBase64 != null)] | length' <<<"$reply")" \
		"$(curl -s "$BASE/isolation" | jq .limits.maxArtifacts)"
	# many-00.txt (mode 0) could not be read, so 31 of the 40 were sent and 8 are over the count
	assert_equal "$(jq -r '.artifacts[] | select(.path == "many-00.txt") | .omitted' <<<"$reply")" "it could not be read"
	assert_equal "$(jq '[.artifacts[] | select(.omitted == "maxArtifacts files were sent before it (by path)")] | length' <<<"$reply")" 8
	# the service answers as before
	execute 'print(6 * 7)'
	assert_equal "$(field .stdout)" 42
	wait_for "a healthy pool" 100 no_run_leftovers
}

@test "files: one run's files are never another's" {
	execute 'import os; print(os.listdir("."))' "{files: $inputs}"
	execute 'import os; print(os.listdir("."))' '{artifacts: true}'
	assert_equal "$(field .stdout)" "['main.py']"
	assert_equal "$(jq -c .artifacts <<<"$reply")" '[]'
}

# inputs N: N unchanged inputs of 100 bytes each, in/f-000.txt on, as a JSON array
inputs_of() {
	jq -cn --argjson n "$1" '[range($n) | {path: ("in/f-" + (tostring | ("00" + .)[-3:]) + ".txt"), content: ("x" * 100)}]'
}

@test "files: whatever the number of inputs, every output is listed and sent, and no unchanged input is (/execute and MCP)" {
	local prog n files out
	# a PNG of one pixel, and two text files around the inputs by path
	prog='import base64
open("a.txt", "w").write("first")
open("z.txt", "w").write("last")
open("z.png", "wb").write(base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="))
print(len(__import__("os").listdir("in")) if __import__("os").path.isdir("in") else 0)'
	for n in 0 31 32 33 100; do
		files=$(inputs_of "$n")
		execute "$prog" "{files: $files, artifacts: true}"
		assert_equal "$code" 200
		assert_equal "$(field .stdout)" "$n"
		run -0 jq -c '[.artifacts[] | [.path, (.contentBase64 != null), .omitted]]' <<<"$reply"
		assert_equal "$output" '[["a.txt",true,null],["z.png",true,null],["z.txt",true,null]]'
		# over MCP the picture is an image block the model sees
		call "$n" "$(jq -cn --arg code "$prog" --argjson f "$files" '{code: $code, files: $f}')"
		out=$reply
		run -0 jq -r '[.result.content[] | .type] | join(",")' <<<"$out"
		assert_output text,image
		run -0 jq -r '.result.content[1].mimeType' <<<"$out"
		assert_output image/png
	done
}
