# frozen_string_literal: true

# Which of farce's minitest files rake test:windows runs on the Windows Ruby
# under wine, and which tests of those it leaves out, by name and why; every
# other file is listed as not run, with its reason. Every file in test/ must
# be in one of the two lists (the task checks), so a new file gets triaged.
#
# Under wine is not Windows: where a test is left out for what wine lacks,
# the reason says how that was told apart from farce (plain Ruby, or farce's
# pure-Ruby loop, under the same wine). "farce bug on Windows" marks what
# farce itself gets wrong there and is still to be fixed.

# Plain Ruby under wine cannot open one either: Socket.new(:UNIX, :STREAM)
# raises EAFNOSUPPORT (this Ruby is built with afunix.h, and Windows 10 has
# AF_UNIX sockets).
WINDOWS_NO_UNIX_SOCKETS = "UNIXSocket.pair: wine has no AF_UNIX sockets (plain Ruby under wine cannot open one either)"
WINDOWS_NO_SHELL = "spawns sh, sleep or true: no POSIX commands under wine"
WINDOWS_POSIX_SIGNALS = "POSIX signals (SIGUSR1): Windows has none"
WINDOWS_LINUX_BACKENDS = "names the epoll, poll or io_uring backend: a Windows farce has IOCP alone"
WINDOWS_FORK = "fork: Windows has none"
WINDOWS_IO_URING = "io_uring: Linux only"
WINDOWS_NO_FLAGS = "reads O_NONBLOCK (IO#nonblock?): Windows has no F_GETFL, and a pipe's non-blocking mode " \
                   "belongs to its handle"
# On Windows a pipe has no kernel wait: a fiber waiting for one sleeps in
# short steps (the stats count a timer, and the driver is never asked).
WINDOWS_PIPE_STATS = "counts the native core's waits or calls for a pipe: on Windows a pipe wait is polled on " \
                     "timers of the loop (the stats count a timer, and no driver call)"
WINDOWS_FILE_STATS = "counts reads in the stats of the Linux file steps (off_loop, cached): on Windows a file read " \
                     "runs on a worker as a stream, which those counts do not see"

WINDOWS_MINITEST = {
  "test_bad_input" => {},
  "test_blocking_fibers" => {},
  "test_buffer_locks" => {},
  "test_core_tick" => {},
  "test_cross_thread_use" => {},
  "test_descriptor_file_identity" => {
    "test_number_closed_behind_the_io_and_reused_is_armed_afresh" => WINDOWS_NO_UNIX_SOCKETS,
    "test_fiber_parked_on_the_old_file_wakes_with_an_error_and_the_new_wait_answers" => WINDOWS_NO_UNIX_SOCKETS,
    "test_dup2_over_a_registered_descriptor_follows_the_new_file" => WINDOWS_NO_UNIX_SOCKETS,
    "test_io_event_selector_on_a_number_closed_behind_its_io_and_reused" => WINDOWS_NO_UNIX_SOCKETS,
    "test_a_turn_inside_the_wait_hook_keeps_the_file_the_wait_was_asked_for" => WINDOWS_NO_UNIX_SOCKETS,
    "test_a_turn_inside_a_write_hook_does_not_write_to_the_new_file" => WINDOWS_NO_UNIX_SOCKETS,
    "test_an_io_closed_while_the_ruby_loop_looks_at_it_raises_nothing_in_another_fiber" => WINDOWS_NO_UNIX_SOCKETS
  },
  "test_enumerator_next_in_a_fiber" => {
    "test_each_char_through_next_reads_a_socket_the_writer_closed" => WINDOWS_NO_UNIX_SOCKETS,
    "test_next_waits_for_bytes_another_thread_writes_later" => WINDOWS_NO_UNIX_SOCKETS
  },
  "test_error_events" => {
    "test_udp_error_is_not_sticky" =>
      "wine never hands a connected UDP socket's port-unreachable to recv: it holds it (SO_ERROR is " \
      "WSAECONNREFUSED, its AFD poll says CONNECT_FAIL) but recv_nonblock would block (plain Ruby under wine: " \
      "IO.select times out; Windows would report it as ECONNRESET, not Linux's ECONNREFUSED)",
    "test_udp_socket_works_after_the_error" =>
      "wine's poll of a UDP socket that had a port-unreachable error misses the datagrams that come later: a plain " \
      "WSAPoll under wine waiting on it sees none either, one made after finds it (internal/driver's " \
      "TestIOCPUDPSocketAfterPortUnreachable; farce's pure-Ruby loop gets the datagram only because its next " \
      "IO.select, after a timer, is a new poll)"
  },
  "test_front_ends" => {
    "test_reads_that_must_wait_use_completion_operations_on_io_uring" => WINDOWS_IO_URING
  },
  "test_interrupt_targets" => {},
  "test_interrupts" => {},
  "test_io" => { "test_unix_socketpair" => WINDOWS_NO_UNIX_SOCKETS,
                 "test_several_fibers_wait_on_one_descriptor_for_different_events" => WINDOWS_NO_UNIX_SOCKETS,
                 "test_transfers_leave_the_descriptors_nonblocking_flag_as_they_found_it" => WINDOWS_NO_FLAGS,
                 "test_writing_to_stdout_leaves_a_blocking_pipe_blocking" => WINDOWS_NO_FLAGS,
                 # the path it tests is Linux's, where the kernel refuses RWF_NOWAIT for pipes
                 "test_a_blocking_pipe_without_rwf_nowait_never_blocks_the_thread" => WINDOWS_NO_FLAGS },
  "test_io_buffer_warning" => {},
  "test_io_lifetimes" => { "test_dropped_ios_are_finalized" => WINDOWS_NO_UNIX_SOCKETS },
  "test_io_select" => { "test_sockets_with_mixed_readiness" => WINDOWS_NO_UNIX_SOCKETS },
  "test_negative_block_timeout" => {},
  "test_nonblocking_callers" => {},
  "test_offload" => {
    "test_close_runs_on_the_loops_thread_not_on_a_worker" => WINDOWS_NO_UNIX_SOCKETS,
    "test_pread_on_a_pipe_raises_espipe" => "expects ESPIPE from pread of a pipe: a Windows Ruby raises EINVAL " \
                                            "(plain Ruby's IO#pread under wine does too)",
    "test_io_pread_hook_directly_returns_count_or_negative_errno" => "expects -ESPIPE from io_pread of a pipe: a " \
                                                                     "Windows Ruby answers EINVAL (plain Ruby under wine does too)"
  },
  "test_process_and_dns" => { "test_backticks_and_system" => WINDOWS_NO_SHELL,
                              "test_wnohang_returns_at_once" => WINDOWS_NO_SHELL,
                              "test_wait_for_any_child" => WINDOWS_NO_SHELL,
                              "test_many_children_at_once" => WINDOWS_NO_SHELL },
  "test_regular_files" => {
    "test_reads_return_the_contents_big_and_small_with_the_position_ruby_reports" => WINDOWS_FILE_STATS,
    "test_a_ticker_fiber_keeps_ticking_while_a_file_is_read" => WINDOWS_FILE_STATS,
    "test_pread_and_pwrite_at_offsets_leave_the_position_alone" =>
      "a Windows Ruby's pread at the end of a file moves the file's position there (plain Ruby under wine: " \
      "IO#pread raising EOFError leaves pos at the end; win32.c returns before it restores the position)"
  },
  "test_reliability" => {
    "test_signal_storm_while_fibers_park_in_every_kind_of_wait" => "sends INT, TERM and USR1 with Process.kill: " \
                                                                     "POSIX signals, Windows has none",
    "test_emfile_goes_to_the_fiber_that_hit_it_and_the_loop_keeps_serving" => "Process.getrlimit: Windows has no " \
                                                                              "POSIX resource limits",
    "test_hundred_forked_workers" => WINDOWS_FORK
  },
  "test_ruby40_hooks" => {
    "test_io_close_with_an_io_object" => WINDOWS_NO_UNIX_SOCKETS
  },
  "test_ruby40_hooks_called_by_ruby" => {
    "test_a_signal_during_a_blocking_call_in_a_fiber_calls_yield" => WINDOWS_POSIX_SIGNALS,
    "test_io_close_gets_the_raw_descriptor_and_ruby_closes_it" =>
      "looks in /proc/self/fd: under wine that lists the wine process's own Linux descriptors, not the Windows Ruby's"
  },
  "test_ruby_loop" => {
    "test_without_the_extension_every_kind_of_wait_runs_on_the_ruby_loop" => WINDOWS_NO_SHELL,
    "test_backend_ruby_is_a_farce_scheduler_with_the_native_stats_keys" => WINDOWS_LINUX_BACKENDS
  },
  "test_scale_and_gc" => {
    "test_ten_thousand_fibers_on_pipes" => "Process.getrlimit: Windows has no POSIX resource limits",
    "test_a_descriptor_reused_after_its_io_was_freed_in_the_same_gc" => WINDOWS_NO_UNIX_SOCKETS
  },
  "test_scheduler_api" => {
    "test_explicit_backends" => WINDOWS_LINUX_BACKENDS,
    "test_farce_backend_environment_variable_is_the_default" => WINDOWS_LINUX_BACKENDS,
    "test_unknown_backend_names_the_choices" => WINDOWS_LINUX_BACKENDS,
    "test_backend_and_fallback_reason" => WINDOWS_LINUX_BACKENDS,
    "test_stats" => WINDOWS_PIPE_STATS
  },
  "test_scheduler_close_at_thread_exit" => {},
  "test_selector_cross_thread" => {},
  "test_single_transfer_hooks" => {},
  "test_sleep_and_sync" => { "test_sleep_order_follows_deadlines" =>
                             "assumes its three fibers start within 10 ms of each other; under wine on a loaded " \
                             "machine they once did not (all three deadlines passed in one poll)" },
  "test_spawn_order" => {},
  "test_system_call_stats" => { "test_the_counts_add_up_on_every_backend" => WINDOWS_PIPE_STATS },
  "test_timeout_held_thread" => {
    "test_tcp_socket_new_to_a_full_accept_queue" =>
      "fills a listener's accept queue until a connect times out, which a Linux kernel does by dropping the SYNs " \
      "to a full queue (Windows refuses them); the blocking fiber's sleep holds the thread in the other tests"
  },
  "test_turns" => {
    "test_ticker_gets_a_turn_while_a_fiber_reads_a_socket_that_always_has_data" => WINDOWS_NO_UNIX_SOCKETS,
    "test_selector_loop_runs_while_a_fiber_reads_a_socket_that_always_has_data" => WINDOWS_NO_UNIX_SOCKETS
  },
  "test_unblock_before_block" => {},
  "test_unwind" => {},
  "test_wait_stress" => {
    "test_random_waits_wakes_and_interruptions" => "its random workload (test/support/wait_stress_workload.rb) " \
                                                   "opens half its streams with #{WINDOWS_NO_UNIX_SOCKETS}",
    "test_nonblocking_read_and_write_never_wait" => WINDOWS_NO_UNIX_SOCKETS,
    "test_io_wait_whose_io_was_closed_before_it_resumed_raises_ioerror" =>
      "its order (one poll finds the pipe readable, the closer runs first) is a kernel wait's: on Windows the waiting " \
      "fiber polls the pipe itself and sees the data before the other fiber closes it"
  },
  "test_wakeup_latency" => {}
}.freeze

WINDOWS_NOT_RUN = {
  "test_fork" => WINDOWS_FORK, "test_prefork_server" => WINDOWS_FORK,
  "test_io_uring" => WINDOWS_IO_URING, "test_io_uring_fd_reuse" => WINDOWS_IO_URING,
  "test_completion_ops" => WINDOWS_IO_URING,
  "test_stall" => "stall detection interrupts the stalled thread with a POSIX signal: on Windows it raises " \
                  "NotImplementedError",
  "test_selector_wait_and_close" => "every test's setup opens #{WINDOWS_NO_UNIX_SOCKETS}",
  "test_ractors" => "its child scripts open #{WINDOWS_NO_UNIX_SOCKETS}, spawn sh, read /proc/self and " \
                    "ask for stall detection (a POSIX signal); the Ractor-safety of the C is the same code",
  "test_docs_match_the_tree" => "reads the tree, not platform behaviour (runs on Linux)",
  "test_ext_layering" => "reads the sources, not platform behaviour (runs on Linux)",
  "test_peer_suite_comparison" => "the peers' suites (Linux)",
  "test_bench_production_targets" => "checks the bench runner's arithmetic, not platform behaviour (runs on Linux)",
  "test_bench_scaling" => "checks the bench runner's arithmetic, not platform behaviour (runs on Linux)",
  "test_bench_connection_targets" => "checks the bench runner's arithmetic, not platform behaviour (runs on Linux)",
  "test_bench_scale_out" => "checks the scale-out bench's table and ratios, not platform behaviour (runs on Linux)",
  "test_bench_steady_window" => "checks the bench's reading of Linux's /proc and ss, not platform behaviour (runs on Linux)",
  "test_bench_group_threads" => "checks the bench's reading of Linux's /proc, not platform behaviour (runs on Linux)",
  "test_bench_server_gc" => "checks the bench's server and runner talking over a pipe, not platform behaviour (runs on Linux)"
}.freeze
