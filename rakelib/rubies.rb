# frozen_string_literal: true

# The Rubies of `rake test:rubies`, and how a command runs on each. Where a
# Ruby comes from and how it finds its test gems is .ci/ruby-run's business
# (the host's 3.1; 3.3/3.4 in the sid chroot; 3.2, 4.0, 4.1 built by
# .ci/ruby-build), so a new leg or a new suite needs only ruby_runner.

RUBY_RUN = File.join(ROOT, ".ci", "ruby-run")
RUBY_BUILD = File.join(ROOT, ".ci", "ruby-build")

# 3.1 Debian 12's, 3.2 the series of Ubuntu 24.04 LTS, 3.3/3.4 Debian sid's,
# 4.0 the current release, 4.1 the development snapshot.
RUBY_LEGS = %w[3.1 3.2 3.3 3.4 4.0 4.1].freeze

# The backends each leg runs the minitest suite on ("all": every backend
# this kernel offers); the Ruby loop ("ruby") runs on every leg. 3.1 runs
# every backend in `rake test` already (the hooks of 3.1 to 3.4, which send
# every read with a length of 0), and 4.0 (the current release, whose hooks
# differ) runs them all here. The others run the default backend: the
# backends differ in Go and in the kernel, not in what Ruby asks of them.
# (3.4 ran every backend too until CI passed an hour on a fresh machine;
# its two extra runs were 2.5 of those minutes and repeated 3.1's hooks.)
# RUBIES_BACKENDS=all runs every backend on every leg.
RUBY_LEG_BACKENDS = {
  "3.1" => %w[auto], "3.2" => %w[auto], "3.3" => %w[auto], "3.4" => %w[auto], "4.0" => "all", "4.1" => %w[auto]
}.freeze

# A leg whose suites (each listed as FAILED in its summary) did not all pass.
class LegFailed < StandardError; end

# The command prefix that runs a command with Ruby `version` as `ruby`
# (`rake`, `rspec`) in the current directory, e.g.
#   sh(*ruby_runner("4.0"), "ruby", "-Ilib", "-e", "...")
def ruby_runner(version)
  [RUBY_RUN, version]
end

# Why Ruby `version` cannot be had here (a message), or nil: the host's and
# the chroot's always can (the chroot is made first); a built one when
# .ci/ruby-build can install it or has.
def ruby_unavailable(version)
  return nil if version == RUBY_ABI || %w[3.3 3.4].include?(version)

  out = IO.popen([RUBY_BUILD, version], err: %i[child out], &:read)
  $stdout.print(out)
  return nil if $?.success?

  out.lines.grep(/\Aruby-build: no Ruby/).last&.sub("ruby-build: ", "")&.strip || "ruby-build #{version} failed"
end

# The minitest backends of one leg (see RUBY_LEG_BACKENDS), the Ruby loop last.
def leg_backends(version, runner)
  chosen = ENV["RUBIES_BACKENDS"] == "all" ? "all" : RUBY_LEG_BACKENDS.fetch(version, %w[auto])
  chosen = offered_backends(runner) - ["ruby"] if chosen == "all"
  chosen + ["ruby"]
end

# Why Async and io-event do not load on this leg's Ruby, or nil.
def async_missing(runner)
  probe = 'begin; require "async"; require "io/event"; rescue LoadError => e; print e.message; end'
  out = IO.popen([*runner, "ruby", "-W0", "-e", probe], err: File::NULL, &:read)
  return "could not ask Ruby whether Async loads" unless $?.success?

  out.empty? ? nil : "Async/io-event do not load (#{out})"
end

# A leg's summary lines with each skip said once (a test skips the same way
# on several backends), and the skips that come with a backend by design
# (the Ruby loop has no Go; io_uring-only tests elsewhere) counted, not listed.
BY_DESIGN_SKIP = /: (the Ruby loop \(FARCE_BACKEND=ruby\)|none of \[)/

def summarize_skips(lines)
  skips = lines.grep(/\A  skip /).uniq
  by_design, other = skips.partition { |l| l.match?(BY_DESIGN_SKIP) }
  kept = lines.grep_v(/\A  skip /)
  kept += ["skipped (each once, on any of the runs above):", *other] unless other.empty?
  kept << "  (#{by_design.size} more skips belong to a backend: the Ruby loop has no Go, some tests are io_uring's)" unless by_design.empty?
  kept
end
