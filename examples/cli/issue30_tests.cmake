# No silently wrong number from whatif, analyze or simulate. Every numeric option is
# checked with a message in the option's own terms; infinities and NaN are refused; options
# that only make sense together are refused alone; an option that cannot repeat is refused;
# a result that would overflow is an error. Uses pipesched_cli_test() from cli_tests.cmake.
set(w30 whatif -s 1f1b -p 4 -m 8)
foreach(case
    "cv negative|--cv: must be a finite number >= 0 and <= 10, got -0.1|--cv;-0.1"
    "cv huge|--cv: must be a finite number >= 0 and <= 10, got 1e\\+155|--cv;1e155"
    "cv nan|--cv: must be a finite number, got \"nan\"|--cv;nan"
    "cv beyond a double|--cv: must be a finite number, got \"1e400\"|--cv;1e400"
    "link-cv negative|--link-cv: must be a finite number >= 0 and <= 10, got -1|--link-cv;-1"
    "replicas 0|--replicas: must be at least 2, got 0|--replicas;0;--gradient-bytes;1"
    "replicas 1|--replicas: must be at least 2, got 1 \\(one replica is the pipeline alone: leave --replicas out\\)|--replicas;1;--gradient-bytes;1"
    "samples 0|--samples: must be at least 1, got 0|--samples;0"
    "samples negative|--samples: must be a whole number >= 0, got \"-3\"|--samples;-3"
    "bandwidth 0|--bandwidth: must be finite and > 0, got 0|--replicas;2;--gradient-bytes;1;--bandwidth;0"
    "bandwidth subnormal|--gradient-bytes: stage 0's all-reduce \\(1 bytes at --bandwidth [0-9.e+-]+\\) takes longer than a double can add up|--replicas;2;--gradient-bytes;1;--bandwidth;1e-320"
    "straggler factor -1|--straggler: stage 1's factor must be finite and > 0, got -1|--straggler;1:-1"
    "straggler factor inf|--straggler \\(K:FACTOR\\): must be a finite number, got \"inf\"|--straggler;1:inf"
    "straggler factor nan|--straggler \\(K:FACTOR\\): must be a finite number, got \"nan\"|--straggler;1:nan"
    "straggler stage out of range|--straggler: stage 9 must be < stages \\(p=4\\)|--straggler;9:2"
    "straggler repeated|--straggler: stage 1 is given twice \\(1.5 and 2\\)|--straggler;1:1.5;--straggler;1:2"
    "stalls duration -1|--stalls \\(D\\): must be finite and >= 0, got -1|--stalls;0.1:-1"
    "stalls probability 2|--stalls \\(P\\): must be in \\[0, 1\\], got 2|--stalls;2:1"
    "gradient-bytes without replicas|--gradient-bytes: only meaningful with --replicas|--gradient-bytes;5"
    "bandwidth without replicas|--bandwidth: only meaningful with --replicas|--bandwidth;2"
    "allreduce-latency without replicas|--allreduce-latency: only meaningful with --replicas|--allreduce-latency;2"
    "replicas without bytes|--gradient-bytes: required with --replicas|--replicas;4"
    "seed -1|--seed: must be a whole number >= 0, got \"-1\"|--seed;-1"
    "all-reduce overflows|--gradient-bytes: stage 0's all-reduce \\(1e\\+308 bytes at --bandwidth 1e-10\\)|--gradient-bytes;1e308;--bandwidth;1e-10;--replicas;2"
    "cv repeated|--cv: At Most 1 required but received 2|--cv;0.1;--cv;0.2")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 message)
  list(SUBLIST parts 2 -1 args)
  pipesched_cli_test("whatif bad input: ${name}" 2 "error: ${message}" ${w30} ${args})
endforeach()

pipesched_cli_test("analyze bad input: rel-threshold -1" 2
  "error: --rel-threshold: threshold must be finite and >= 0, got -1"
  analyze ${PROJECT_SOURCE_DIR}/examples/robustness/straggler_run.csv --rel-threshold -1)
pipesched_cli_test("analyze bad input: abs-threshold nan" 2
  "error: --abs-threshold: must be a finite number, got \"nan\""
  analyze ${PROJECT_SOURCE_DIR}/examples/robustness/straggler_run.csv --abs-threshold nan)
pipesched_cli_test("analyze bad input: comm -1" 2
  "error: --comm: must be finite and >= 0, got -1"
  analyze ${PROJECT_SOURCE_DIR}/examples/robustness/straggler_run.csv --comm -1)

# Statistics without noise: mean = min = max and the deviation 0 exactly (10,000 equal samples
# used to give a mean 2e-12 above the max and a deviation of 2.4e-12).
pipesched_cli_test("whatif without noise: mean = min = max, sd 0" 0
  "\"max\": 120.39999999999988,\n  \"mean\": 120.39999999999988,\n  \"min\": 120.39999999999988,.*\"stddev\": 0.0"
  whatif -s 1f1b -p 8 -m 32 --cost 1,1.2,0.8,0.05 --samples 10000 --json)

# Links from the CLI: priority removes the stall FIFO shows, and where it
# loses, it loses one ring-step latency (docs/robustness.md §8).
set(links30 whatif -s 1f1b -p 4 -m 8 --link-bandwidth 1 --message-bytes 0.5 --replicas 4
            --gradient-bytes 16 --buckets 4 --samples 1 --json)
pipesched_cli_test("whatif links: FIFO stalls behind the all-reduce" 0
  "\"mean\": 65.0,.*\"stall_behind_bulk\": 1.5,\n  \"stddev\": 0.0,\n  \"traffic\": \"fifo\""
  ${links30} --traffic fifo)
pipesched_cli_test("whatif links: priority removes the stall" 0
  "\"mean\": 63.5,.*\"stall_behind_bulk\": 0.0,\n  \"stddev\": 0.0,\n  \"traffic\": \"priority\""
  ${links30} --traffic priority)
set(lose30 whatif -s interleaved-1f1b -p 2 -m 4 --link-bandwidth 0.5 --message-bytes 1
           --replicas 2 --gradient-bytes 8 --allreduce-latency 1 --samples 1 --json)
pipesched_cli_test("whatif links: where priority loses one ring-step latency (FIFO)" 0
  "\"mean\": 48.5,.*\"stall_behind_bulk\": 2.0" ${lose30} --traffic fifo)
pipesched_cli_test("whatif links: where priority loses one ring-step latency (priority)" 0
  "\"mean\": 49.5,.*\"stall_behind_bulk\": 0.0" ${lose30} --traffic priority)
pipesched_cli_test("whatif bad input: message-bytes without links" 2
  "error: --message-bytes: only meaningful with --link-bandwidth" ${w30} --message-bytes 1)
pipesched_cli_test("whatif bad input: traffic unknown" 2
  "error: --traffic: must be fifo or priority, got \"lifo\"" ${w30} --link-bandwidth 1 --traffic lifo)
pipesched_cli_test("whatif bad input: ring bandwidth with links" 2
  "error: --bandwidth: not with --link-bandwidth \\(the all-reduce shares the links\\)"
  ${w30} --link-bandwidth 1 --bandwidth 2 --replicas 2 --gradient-bytes 1)

# analyze validates the trace it reads.
set(traces ${PROJECT_SOURCE_DIR}/docs/examples/errors)
pipesched_cli_test("analyze: an op measured twice" 2
  "error: analyze: stage 0 ran F3 twice \\(at 30.017 and at 300\\): a trace has each op once"
  analyze ${traces}/trace_duplicate.csv)
pipesched_cli_test("analyze: a missing op" 2
  "error: analyze: the order the trace ran: schedule \"measured\" is invalid: stage 0: backward \\(BW, or B and W\\) 3 of chunk 0 is missing"
  analyze ${traces}/trace_missing.csv)
pipesched_cli_test("analyze: overlapping ops" 2
  "error: analyze: stage 1: F1 \\(22.43 .. 34.276\\) overlaps F2 \\(30 .. 46.588\\): a stage runs one op at a time"
  analyze ${traces}/trace_overlap.csv)
pipesched_cli_test("analyze: overlapping ops accepted with a warning" 0
  "re-plan with.*warning: stage 1: F1 \\(22.43 .. 34.276\\) overlaps F2 \\(30 .. 46.588\\)"
  analyze ${traces}/trace_overlap.csv --allow-overlap)

# simulate over links: the same links options, no noise, each link's traffic.
set(slinks30 simulate -s 1f1b -p 4 -m 8 --link-bandwidth 1 --message-bytes 0.5 --replicas 4
             --gradient-bytes 16 --buckets 4)
pipesched_cli_test("simulate links: FIFO" 0
  "makespan 42.5 cost units  iteration 65 cost units \\(with the all-reduce\\)  pipeline sends waited 1.5 cost units, 1.5 of them behind all-reduce bytes\nlink 0: busy 28"
  ${slinks30} --traffic fifo)
pipesched_cli_test("simulate links: priority, JSON" 0
  "\"iteration\": 63.5,.*\"stall_behind_bulk\": 0.0,\n  \"traffic\": \"priority\""
  ${slinks30} --traffic priority --json)
pipesched_cli_test("simulate links: replicas alone" 2
  "error: --link-bandwidth: required to time links" simulate -s 1f1b -p 4 -m 8 --replicas 4
  --gradient-bytes 1)
pipesched_cli_test("simulate links: not as a picture" 2
  "error: --format svg: not with --link-bandwidth \\(text or json\\)"
  simulate -s 1f1b -p 4 -m 8 --link-bandwidth 1 -f svg)
