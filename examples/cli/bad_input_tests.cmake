# The CLI bad-input matrix (issue 9, docs/errors.md): every invalid option value or input file
# gives one `error: ...` line on stderr and exit code 2, or, for a readable but invalid schedule,
# the violations on stdout and exit code 1; never a crash, a hang or an allocation blow-up.
# Uses pipesched_cli_test() from cli_tests.cmake. Input files are written at configure time.
set(bad ${CMAKE_CURRENT_BINARY_DIR}/bad_input)
file(MAKE_DIRECTORY ${bad})
file(WRITE ${bad}/empty.json "")
file(WRITE ${bad}/truncated.json [=[{"version":1,"stages":2,"microbatches":2,"ops":[[{"kind":"F","mb":0},{"ki]=])
string(ASCII 1 2 3 27 127 200 255 254 garbage_bytes)
file(WRITE ${bad}/garbage.json "${garbage_bytes}{{[[\"\\")
string(REPEAT "[]," 65535 empty_lists)
file(WRITE ${bad}/huge_spec.json
     "{\"version\":1,\"stages\":65536,\"microbatches\":16777216,\"ops\":[${empty_lists}[]]}")
file(WRITE ${bad}/huge_chunks.json
     [=[{"version":1,"stages":16384,"chunks":65535,"microbatches":1,"ops":[]}]=])
file(WRITE ${bad}/stages_string.json [=[{"version":1,"stages":"4","microbatches":1,"ops":[[]]}]=])
file(WRITE ${bad}/ops_object.json [=[{"version":1,"stages":1,"microbatches":1,"ops":{}}]=])
file(WRITE ${bad}/version2.json [=[{"version":2,"stages":1,"microbatches":1,"ops":[[]]}]=])
file(WRITE ${bad}/negative_mb.json
     [=[{"version":1,"stages":1,"microbatches":1,"ops":[[{"kind":"F","mb":-1}]]}]=])
file(WRITE ${bad}/number_overflow.json [=[{"version":1,"stages":1E400}]=])
file(WRITE ${bad}/not_object.json "[1,2,3]")

set(gen generate -s 1f1b)
# Shapes: negative, zero, NaN, inf, fractions, beyond 32 bits, p*m beyond 32 bits.
pipesched_cli_test("bad: p*m overflows 32 bits" 2 "error: 1f1b: stages\\*microbatches\\*chunks \\(1099511627776\\) is too large" ${gen} -p 65536 -m 16777216)
pipesched_cli_test("bad: m beyond 32 bits" 2 "error: Could not convert: --microbatches = 4294967296" ${gen} -p 2 -m 4294967296)
pipesched_cli_test("bad: p beyond 32 bits" 2 "error: Could not convert: --stages = 4294967296" ${gen} -p 4294967296 -m 2)
pipesched_cli_test("bad: p above max_stages" 2 "error: 1f1b: stages \\(p=65537\\) must be at most 65536" ${gen} -p 65537 -m 2)
pipesched_cli_test("bad: m above max_microbatches" 2 "error: 1f1b: microbatches \\(m=16777217\\) must be at most 16777216" ${gen} -p 2 -m 16777217)
pipesched_cli_test("bad: m negative" 2 "error: Could not convert: --microbatches = -1" ${gen} -p 2 -m -1)
pipesched_cli_test("bad: m zero" 2 "error: 1f1b: microbatches \\(m=0\\) must be at least 1" ${gen} -p 2 -m 0)
pipesched_cli_test("bad: p NaN" 2 "error: Could not convert: --stages = nan" ${gen} -p nan -m 2)
pipesched_cli_test("bad: p inf" 2 "error: Could not convert: --stages = inf" ${gen} -p inf -m 2)
pipesched_cli_test("bad: p fraction" 2 "error: Could not convert: --stages = 2.5" ${gen} -p 2.5 -m 2)
pipesched_cli_test("bad: v negative" 2 "error: Could not convert: --chunks = -1" ${gen} -p 2 -m 2 -v -1)
pipesched_cli_test("bad: v wrong for the schedule" 2 "error: 1f1b: chunks \\(v=99999\\) must be 1 for this schedule" ${gen} -p 2 -m 2 -v 99999)
pipesched_cli_test("bad: p missing" 2 "error: --stages and --microbatches are required with --schedule" ${gen})
pipesched_cli_test("bad: unknown simulate schedule" 2 "error: unknown schedule \"zb-h9\" \\(known: " simulate -s zb-h9 -p 2 -m 2)
# Costs and memory.
pipesched_cli_test("bad: cost NaN" 2 "error: --cost: expected TF,TB,TW\\[,TC\\] \\(finite numbers >= 0\\), got \"nan,1,1\"" simulate -s 1f1b -p 2 -m 2 --cost nan,1,1)
pipesched_cli_test("bad: cost inf" 2 "error: --cost: expected TF,TB,TW\\[,TC\\] \\(finite numbers >= 0\\), got \"1,inf,1\" \\(\"inf\" is not one\\)" simulate -s 1f1b -p 2 -m 2 --cost 1,inf,1)
pipesched_cli_test("bad: cost out of double range" 2 "error: --cost: expected TF,TB,TW\\[,TC\\] \\(finite numbers >= 0\\), got \"1e999,1,1\"" simulate -s 1f1b -p 2 -m 2 --cost 1e999,1,1)
pipesched_cli_test("bad: cost too few" 2 "error: --cost: expected TF,TB,TW\\[,TC\\], got 2 value\\(s\\)" simulate -s 1f1b -p 2 -m 2 --cost 1,1)
pipesched_cli_test("bad: cost empty pieces" 2 "error: --cost: expected TF,TB,TW\\[,TC\\] \\(finite numbers >= 0\\), got \",,\"" simulate -s 1f1b -p 2 -m 2 --cost ,,)
# The library's own M_W <= M_B rule and message (memory_model), after the option's name.
pipesched_cli_test("bad: memory MW > MB" 2 "error: --memory: memory_model: weight-gradient memory \\(M_W=1\\) must be <= activation memory \\(M_B=0.5\\)" simulate -s 1f1b -p 2 -m 2 --memory 0.5,1)
pipesched_cli_test("bad: memory negative" 2 "error: --memory: expected MB,MW\\[,MIN\\] \\(finite numbers >= 0\\), got \"-1,0\"" simulate -s 1f1b -p 2 -m 2 --memory -1,0)
pipesched_cli_test("bad: memory limit NaN" 2 "error: --memory-limit: must be a finite number > 0, got \"nan\"" simulate -s 1f1b -p 2 -m 2 --memory-limit nan)
pipesched_cli_test("bad: memory limit zero" 2 "error: --memory-limit: must be a finite number > 0" validate -s 1f1b -p 2 -m 2 --memory-limit 0)
pipesched_cli_test("bad: memory limit -inf" 2 "error: --memory-limit: must be a finite number > 0, got \"-inf\"" simulate -s 1f1b -p 2 -m 2 --memory-limit -inf)
# Options: unknown values, unknown flags, contradictions, unwritable output.
pipesched_cli_test("bad: recv value" 2 "error: --recv: must be eager or late, not \"sideways\"" ${gen} -p 2 -m 2 --with-comm --recv sideways)
pipesched_cli_test("bad: unknown flag" 2 "error: The following argument was not expected: --frobnicate" ${gen} -p 2 -m 2 --frobnicate)
pipesched_cli_test("bad: unknown subcommand" 2 "error: " frobnicate)
pipesched_cli_test("bad: --input with --schedule" 2 "error: --schedule excludes --input" validate --input ${bad}/empty.json -s 1f1b)
pipesched_cli_test("bad: --input with --stages" 2 "error: --stages excludes --input" simulate --input ${bad}/empty.json -p 2)
pipesched_cli_test("bad: unwritable output" 2 "error: /nonexistent/dir/x.json: cannot open for writing" ${gen} -p 2 -m 2 -o /nonexistent/dir/x.json)
# Files: empty, truncated, garbage, directories, devices, wrong types, huge declared sizes.
pipesched_cli_test("bad: empty file" 2 "error: .*empty.json \\(read as json\\): schedule JSON: malformed JSON: .*unexpected end of input" validate --input ${bad}/empty.json)
pipesched_cli_test("bad: truncated file" 2 "error: .*truncated.json \\(read as json\\): schedule JSON: malformed JSON" validate --input ${bad}/truncated.json)
pipesched_cli_test("bad: binary garbage" 2 "error: .*garbage.json \\(read as json\\): schedule JSON: malformed JSON" simulate --input ${bad}/garbage.json)
pipesched_cli_test("bad: directory as input" 2 "error: .*bad_input: is a directory, not a file" validate --input ${bad})
pipesched_cli_test("bad: number overflow" 2 "error: .*number_overflow.json \\(read as json\\): schedule JSON: malformed JSON: .*number overflow" validate --input ${bad}/number_overflow.json)
pipesched_cli_test("bad: not an object" 2 "error: .*not_object.json \\(read as json\\): /: must be an object, not array" validate --input ${bad}/not_object.json)
pipesched_cli_test("bad: stages as string" 2 "error: .*stages_string.json \\(read as json\\): /stages: must be an integer, not string" validate --input ${bad}/stages_string.json)
pipesched_cli_test("bad: ops as object" 2 "error: .*ops_object.json \\(read as json\\): /ops: must be an array, not object" validate --input ${bad}/ops_object.json)
pipesched_cli_test("bad: version 2" 2 "error: .*version2.json \\(read as json\\): /version: unsupported schedule format version 2" validate --input ${bad}/version2.json)
pipesched_cli_test("bad: negative mb" 2 "error: .*negative_mb.json \\(read as json\\): /ops/0/0/mb: must be an integer >= 0, not -1" validate --input ${bad}/negative_mb.json)
pipesched_cli_test("bad: huge chunks" 2 "error: .*huge_chunks.json \\(read as json\\): /chunks: stages\\*chunks \\(1073725440\\) must be at most 16777216" validate --input ${bad}/huge_chunks.json)
# 2^40 declared (chunk, micro-batch) pairs and no ops: one summary line, no p*v*m tables.
pipesched_cli_test("bad: huge declared spec (validate)" 1 "missing: schedule: stages\\*chunks\\*microbatches \\(1099511627776\\) \\(chunk, micro-batch\\) pairs need at least 2199023255552 ops" validate --input ${bad}/huge_spec.json)
pipesched_cli_test("bad: huge declared spec (simulate)" 1 "missing: schedule: stages\\*chunks\\*microbatches \\(1099511627776\\)" simulate --input ${bad}/huge_spec.json --json)
