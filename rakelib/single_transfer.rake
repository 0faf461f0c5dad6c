# frozen_string_literal: true

# Ruby 4.1's read/write hooks (scheduler interface version 4,
# ruby/ruby#18483) are chosen when farce is built, from the Ruby headers
# (ext/farce/io_transfer.h). Until a Ruby that has them is at hand, this
# builds farce against a copy of the current Ruby's headers whose two
# version numbers say what 4.1's do (RUBY_FIBER_SCHEDULER_VERSION 4,
# RUBY_IO_BUFFER_VERSION 3: counted buffer locks), so that every line bound
# only on 4.1 is compiled and linked, and runs test/single_transfer_build_check.rb
# against that build. No scheduler is set there, so this Ruby never calls
# the hooks itself (it would in the old order): the check calls them by hand.
namespace :test do
  desc "Build with Ruby 4.1's interface versions in this Ruby's headers, then call the 4.1 hooks of that build"
  task :single_transfer do
    work = File.join(ROOT, "tmp", "single-transfer-#{RUBY_ABI}")
    FileUtils.rm_rf(work)
    include_dir = File.join(work, "include")
    arch_dir = File.join(work, "include-arch")
    FileUtils.mkdir_p(work)
    FileUtils.cp_r(RbConfig::CONFIG["rubyhdrdir"], include_dir)
    FileUtils.cp_r(RbConfig::CONFIG["rubyarchhdrdir"], arch_dir)
    raise_version(File.join(include_dir, "ruby", "fiber", "scheduler.h"), "RUBY_FIBER_SCHEDULER_VERSION", 4)
    raise_version(File.join(include_dir, "ruby", "io", "buffer.h"), "RUBY_IO_BUFFER_VERSION", 3)

    build = File.join(work, "build")
    FileUtils.mkdir_p(build)
    Dir.chdir(build) do
      sh RbConfig.ruby, File.join(ROOT, "ext", "farce", "extconf.rb")
      sh "make", "-j2", "hdrdir=#{include_dir}", "arch_hdrdir=#{arch_dir}"
    end
    lib = File.join(work, "lib")
    FileUtils.cp_r(File.join(ROOT, "lib"), lib)
    target = File.join(lib, "farce", RUBY_ABI)
    FileUtils.rm_rf(target)
    FileUtils.mkdir_p(target)
    %w[farce_ext.so libfarce_core.so].each { |f| FileUtils.cp(File.join(build, f), target) }
    sh RbConfig.ruby, "-I", lib, "-I", File.join(ROOT, "test"), File.join(ROOT, "test", "single_transfer_build_check.rb")
  end

  # Sets `name` to `value` in a copied header, adding the definition after
  # the include guard when that Ruby's header has none (3.1 names no
  # scheduler interface version).
  def raise_version(header, name, value)
    text = File.read(header)
    define = "#define #{name} #{value}"
    text = if text.match?(/^#define #{name} \d+$/)
             text.sub(/^#define #{name} \d+$/, define)
           else
             text.sub(/^(#define [A-Z_]+_H\b.*|#define RUBY_IO_BUFFER_T 1)$/) { "#{Regexp.last_match(1)}\n#{define}" }
           end
    raise "#{header}: could not set #{name}" unless text.include?(define)

    File.write(header, text)
  end
end
