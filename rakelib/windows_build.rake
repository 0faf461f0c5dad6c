# frozen_string_literal: true

# rake compile:windows: farce for a Windows Ruby (x64-mingw-ucrt), built on
# this Linux machine in the Debian sid chroot of .ci/sid-setup --wine (the
# UCRT mingw-w64 toolchain; Debian 12's targets only msvcrt). The extension
# and farce_core.dll are staged in tmp/windows-lib/farce/X.Y/, where the
# Windows gem and test:windows take them from (rakelib/windows_gem.rake,
# rakelib/windows_test.rake). docs/windows.md tells the whole story.
require_relative "windows"

namespace :compile do
  desc "Build farce_ext.so and farce_core.dll for the Windows Ruby in FARCE_WINDOWS_RUBIES (sid chroot)"
  task :windows do
    ruby, why = windows_ruby
    raise "compile:windows: #{why}" unless ruby

    abi = windows_ruby_abi(ruby)
    build = File.join(ROOT, "tmp", "build-#{WINDOWS_PLATFORM}-#{abi}")
    FileUtils.mkdir_p(build)
    Dir.chdir(ROOT) do
      # mkmf is re-run every time, as for `rake compile`; the host's Go,
      # which sid-run lends, builds the DLL.
      script = "cd #{build} && ruby --disable-gems -r #{File.join(ROOT, 'rakelib', 'windows_mkmf.rb')} " \
               "#{File.join(ROOT, 'ext', 'farce', 'extconf.rb')} && rm -f farce_ext.so && make -j2"
      sid_run("nice", "sh", "-c", script, env: { "FARCE_WINDOWS_RUBY" => ruby, "FARCE_REQUIRE_NATIVE" => "1" })
    end
    out = File.join(WINDOWS_STAGE, "farce", abi)
    FileUtils.mkdir_p(out)
    %w[farce_ext.so farce_core.dll].each do |f|
      file = File.join(build, f)
      raise "#{file} is not a Windows (PE) file" unless File.binread(file, 2) == "MZ"

      FileUtils.cp(file, out)
    end
    puts "compile:windows: #{out}/farce_ext.so and farce_core.dll for Ruby #{abi} #{WINDOWS_PLATFORM}"
  end
end
