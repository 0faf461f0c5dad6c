# frozen_string_literal: true

# Ruby 4.1's read/write hooks (scheduler interface version 4,
# ruby/ruby#18483) are chosen when farce is built, from the Ruby headers
# (ext/farce/hook_io/io_transfer.h). The 4.1 tree at hand (master of 2026-08-23)
# already has what else 4.1 changes for them, counted IO::Buffer locks
# (rb_io_buffer_new_locked, ruby/ruby#18429), but its headers still say
# RUBY_FIBER_SCHEDULER_VERSION 3. So this builds farce against a copy of
# the running Ruby's own headers in which only that number says 4, runs
# test/single_transfer_build_check.rb against that build, on every backend
# the build offers, and lets nothing in it skip. The buffer locks are then
# the real ones this Ruby has, asked by extconf.rb as any build asks.
#
# No scheduler hook is called by this Ruby in the version 4 form (it would
# call them in the old order): the check calls them by hand.
#
# Only a Ruby with counted locks can run this (.ci/ruby-run 4.1 rake
# test:single_transfer): every Ruby that will call these hooks counts its
# locks, so a build joining them with one lock flag (any Ruby up to 4.0)
# would test a Ruby that cannot exist, with farce_buffer_lock_init's rule
# for flags, not the one that will run. Elsewhere the task says so and does
# nothing. A Ruby whose headers already say 4 is built as it is: this is
# then the real path, and the regular suites cover it too.
namespace :test do
  desc "Build against this Ruby's headers with RUBY_FIBER_SCHEDULER_VERSION 4, then call the 4.1 hooks of that build (Ruby 4.1)"
  task :single_transfer do
    if IO::Buffer.const_defined?(:LOCKED)
      puts "test:single_transfer: skipped on Ruby #{RUBY_VERSION}: it needs a Ruby with counted IO::Buffer locks " \
           "(no IO::Buffer::LOCKED), as every Ruby that calls the version 4 hooks has: " \
           "run `.ci/ruby-run 4.1 rake test:single_transfer`"
      next
    end

    work = File.join(ROOT, "tmp", "single-transfer-#{RUBY_ABI}")
    FileUtils.rm_rf(work)
    include_dir = File.join(work, "include")
    FileUtils.mkdir_p(work)
    FileUtils.cp_r(RbConfig::CONFIG["rubyhdrdir"], include_dir)
    scheduler_h = File.join(include_dir, "ruby", "fiber", "scheduler.h")
    version = File.read(scheduler_h)[/^#define RUBY_FIBER_SCHEDULER_VERSION (\d+)$/, 1].to_i
    if version >= 4
      puts "test:single_transfer: this Ruby's headers say RUBY_FIBER_SCHEDULER_VERSION #{version}: built as they are"
    else
      raise_version(scheduler_h, "RUBY_FIBER_SCHEDULER_VERSION", 4)
    end

    build = File.join(work, "build")
    FileUtils.mkdir_p(build)
    Dir.chdir(build) do
      sh RbConfig.ruby, File.join(ROOT, "ext", "farce", "extconf.rb")
      # extconf.rb asked this Ruby which lock it has; the check below counts on the answer
      unless File.read("Makefile").include?("-DHAVE_RB_IO_BUFFER_NEW_LOCKED")
        raise "test:single_transfer: extconf.rb found no rb_io_buffer_new_locked in Ruby #{RUBY_VERSION}, " \
              "which has no IO::Buffer::LOCKED: the build would hold buffers by the flag's rule"
      end
      sh "make", "-j2", "hdrdir=#{include_dir}"
    end
    lib = File.join(work, "lib")
    FileUtils.cp_r(File.join(ROOT, "lib"), lib)
    target = File.join(lib, "farce", RUBY_ABI)
    FileUtils.rm_rf(target)
    FileUtils.mkdir_p(target)
    %w[farce_ext.so libfarce_core.so].each { |f| FileUtils.cp(File.join(build, f), target) }
    # io_uring's tests skip only where the kernel has none (the build asked)
    # FARCE_HOOK_FORMS_UNCHECKED: this Ruby calls the old forms, the check only calls by hand
    uring = system({ "FARCE_HOOK_FORMS_UNCHECKED" => "1" }, RbConfig.ruby, "-I", lib, "-rfarce", "-e",
                   "exit Farce::Scheduler.new(backend: :io_uring).stats[:completion_ops]", err: File::NULL)
    puts "test:single_transfer: this kernel offers no io_uring completion operations: their tests skip" unless uring
    run_minitest(["env", "FARCE_SINGLE_TRANSFER_BUILD=1", "FARCE_HOOK_FORMS_UNCHECKED=1", RbConfig.ruby, "-I", lib, "-I", File.join(ROOT, "test"),
                  File.join(ROOT, "test", "single_transfer_build_check.rb"), "-v"],
                 "test:single_transfer (Ruby #{RUBY_VERSION}, RUBY_FIBER_SCHEDULER_VERSION 4)", require_no_skips: uring)
  end

  # Sets `name` to `value` in a copied header.
  def raise_version(header, name, value)
    text = File.read(header)
    define = "#define #{name} #{value}"
    text = text.sub(/^#define #{name} \d+$/, define)
    raise "#{header}: could not set #{name}" unless text.include?(define)

    File.write(header, text)
  end
end
