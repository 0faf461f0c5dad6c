# frozen_string_literal: true

# Loads the compiled extension. `rake compile` puts one build per Ruby
# version under lib/farce/<major.minor>/ (so several Rubies can share a
# checkout), and so does the precompiled x86_64-linux gem; the source gem,
# compiled at install time, has it directly under farce/.
# Loading it does not start Go: the core library is opened on first use.
#
# When the extension is not there (gem installed without Go, on an OS the
# native core does not support, or its build failed: ext/farce/extconf.rb
# then installs farce/native_status.rb saying why), farce runs on its
# Ruby loop (the pure-Ruby fallback, lib/farce/ruby_loop.rb) and
# Native.unavailable says why.
module Farce
  # The backend a scheduler or selector uses when none is named: FARCE_BACKEND,
  # else :auto. The one place the variable is read (the selector's C asks here).
  def self.backend_from_environment
    name = ENV.fetch("FARCE_BACKEND", "")
    name.empty? ? :auto : name.to_sym
  end

  # Whether Farce::Scheduler.new may use the native extension (and its Go
  # core) or runs on the Ruby loop.
  module Native
    @unavailable = nil

    class << self
      # Why the native extension is not loaded (a String), or nil when it is.
      attr_reader :unavailable

      def loaded?
        @unavailable.nil?
      end

      # FARCE_REQUIRE_NATIVE=1: never fall back to the Ruby loop.
      def required?
        value = ENV.fetch("FARCE_REQUIRE_NATIVE", "")
        !value.empty? && value != "0"
      end

      # In the main Ractor, at load; frozen, so that every Ractor may read it.
      def mark_unavailable(reason)
        @unavailable = reason.frozen? ? reason : reason.dup.freeze
      end

      # Why a scheduler asked for backend `name` runs on the Ruby loop
      # before the native one is tried, or nil to try the native core.
      # Raises Farce::Error when the Ruby loop must not be used.
      def fallback_reason(name, explicit:)
        if name == :ruby
          return explicit ? "backend: :ruby asked for the Ruby loop" : "FARCE_BACKEND=ruby asked for the Ruby loop"
        end
        return nil if loaded?

        refuse(unavailable) if required?
        unless name == :auto
          raise Farce::Error, "farce backend #{name.inspect} needs farce's native core, which is not available: #{unavailable}"
        end
        announce(unavailable)
      end

      # After the native core failed with `error`: why the scheduler runs on
      # the Ruby loop instead, or nil to raise error. Only a core that could
      # not be loaded (missing or broken library, a forked child of a
      # process whose Go runtime had started) is replaced, and only for :auto;
      # a driver that fails in a loaded core (EMFILE...) is the caller's error.
      def fallback_reason_after(name, error)
        return nil unless name == :auto && !Farce.core_loaded?

        refuse(error.message) if required?
        announce(error.message)
      end

      private

      # A fallback nobody asked for is said once per process, on stderr: a
      # broken build must not hide behind a silent slow path. Choosing the
      # Ruby loop (FARCE_BACKEND=ruby) silences it. (Once per Ractor in the
      # others: Ruby lets only the main Ractor set a module's variables.)
      def announce(reason)
        unless announced?
          announced!
          warn "farce: running on the pure-Ruby loop (several times slower than the native core): #{reason} " \
               "(FARCE_BACKEND=ruby chooses it and silences this; FARCE_REQUIRE_NATIVE=1 makes it an error)"
        end
        reason
      end

      def announced?
        Farce.main_ractor? ? @announced : Farce.ractor_local(:farce_fallback_announced) { false }
      end

      def announced!
        if Farce.main_ractor?
          @announced = true
        else
          Ractor.current[:farce_fallback_announced] = true
        end
      end

      def refuse(reason)
        raise Farce::Error, "#{reason} (FARCE_REQUIRE_NATIVE is set: farce does not fall back to its Ruby loop)"
      end
    end
  end
end

begin
  require "farce/#{RUBY_VERSION[/\A\d+\.\d+/]}/farce_ext"
rescue LoadError => refused
  # The extension for this X.Y is there but was built against another
  # Ruby's headers (buffer_lock.c, io_transfer_v4.c say which and how): a
  # rebuild is needed, and the Ruby loop in its place would hide that.
  raise if refused.message.start_with?("farce was built for a Ruby ")

  begin
    require "farce/farce_ext"
  rescue LoadError => e
    built_for = Dir[File.join(__dir__, "[0-9]*.[0-9]*", "farce_ext.so")].map { |f| File.basename(File.dirname(f)) }.sort
    status = begin
      require "farce/native_status" # written by extconf.rb when it skipped the native build
      Farce::Native::BUILD_SKIPPED
    rescue LoadError
      nil
    end
    status ||=
      if built_for.empty?
        "farce's extension is not built for Ruby #{RUBY_VERSION} (#{e.message}); run `rake compile` " \
          "in the farce checkout, or reinstall the gem"
      else
        "farce's extension is not built for Ruby #{RUBY_VERSION}: this copy of farce is built for Ruby " \
          "#{built_for.join(', ')} only; install the source gem, which compiles for this Ruby (needs Go and a " \
          "C compiler): `gem install farce --platform ruby` (or `rake compile` in a checkout)"
      end
    Farce::Native.mark_unavailable(status)
    # What the extension would have defined, for the Ruby loop.
    module Farce
      class Error < StandardError; end

      def self.core_loaded?
        false
      end
    end
  end
end
