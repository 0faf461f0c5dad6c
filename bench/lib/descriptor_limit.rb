# frozen_string_literal: true

module Bench
  # Descriptors enough for a benchmark's children: wrk holding N connections
  # needs N + a few, and so does the server (which raises its own soft limit to
  # the hard one; wrk does not). Called in the driver before it starts them,
  # so that every child inherits the limit.
  module DescriptorLimit
    module_function

    # Raises the soft limit to the hard one, and the hard one to `wanted` where
    # it is lower and the process may (root, up to fs.nr_open). Returns the
    # soft limit now in force.
    def raise_to(wanted)
      soft, hard = Process.getrlimit(:NOFILE)
      if hard < wanted
        begin
          Process.setrlimit(:NOFILE, wanted, wanted)
          return wanted
        rescue SystemCallError
          nil # not allowed: the hard limit stays, the caller says what it means
        end
      end
      Process.setrlimit(:NOFILE, hard, hard) if soft < hard
      Process.getrlimit(:NOFILE)[0]
    end
  end
end
