# frozen_string_literal: true

# What the Windows tasks share (rakelib/windows_build.rake, windows_gem.rake,
# windows_test.rake): where the Windows Ruby is, where its build is staged,
# and how a command runs in the sid chroot or under wine there.
#
# FARCE_WINDOWS_RUBIES names a folder holding a Windows Ruby: unpacked
# (ruby-X.Y.Z-x64-mingw-ucrt/bin/ruby.exe), or as the tarball
# ruby-X.Y.Z-x64-mingw-ucrt.tar.xz, which is unpacked into tmp/ once.
require "fileutils"
require "tempfile"

WINDOWS_PLATFORM = "x64-mingw-ucrt"
WINDOWS_STAGE = File.join(ROOT, "tmp", "windows-lib")
# One wine prefix for every task: its first start takes seconds to make it.
WINDOWS_WINE_PREFIX = File.join(ROOT, "tmp", "wine-prefix")

# The unpacked Windows Ruby (its folder), or nil with the reason why none.
def windows_ruby
  from = ENV.fetch("FARCE_WINDOWS_RUBIES", "")
  return [nil, "FARCE_WINDOWS_RUBIES is not set (a folder with a #{WINDOWS_PLATFORM} Ruby)"] if from.empty?

  unpacked = Dir[File.join(from, "ruby-*-#{WINDOWS_PLATFORM}", "bin", "ruby.exe")].max
  return [File.dirname(unpacked, 2), nil] if unpacked

  tarball = Dir[File.join(from, "ruby-*-#{WINDOWS_PLATFORM}.tar.xz")].max
  return [nil, "no ruby-*-#{WINDOWS_PLATFORM}/ or its .tar.xz in #{from}"] unless tarball

  into = File.join(ROOT, "tmp", "windows-rubies")
  dir = File.join(into, File.basename(tarball, ".tar.xz"))
  unless File.file?(File.join(dir, "bin", "ruby.exe"))
    FileUtils.rm_rf(dir)
    FileUtils.mkdir_p(into)
    sh "tar", "-xJf", tarball, "-C", into
  end
  [dir, nil]
end

# Its X.Y (from the folder of its rbconfig.rb, lib/ruby/X.Y.0/).
def windows_ruby_abi(dir)
  Dir[File.join(dir, "lib", "ruby", "[0-9]*.[0-9]*.0")].map { |d| File.basename(d)[/\A\d+\.\d+/] }.max
end

# Runs cmd in the sid chroot; a path inside the worktree is the same there
# (.ci/sid-run binds the current directory at the same path).
def sid_run(*cmd, env: {})
  sh env, File.join(ROOT, ".ci", "sid-run"), *cmd
end

# The environment every wine run gets: farce's own prefix, and wine's
# debugging chatter off.
def wine_env(env = {})
  { "WINEPREFIX" => WINDOWS_WINE_PREFIX, "WINEDEBUG" => "-all" }.merge(env)
end

# Runs the Windows Ruby with args (shell words) under wine in the sid chroot
# from dir (inside ROOT), killed after seconds; returns [output, success].
# The output goes through a file, not a pipe: what wine starts beside the
# first program (its server, services.exe) inherits it and outlives the
# run, and a pipe would stay open, the read waiting, until they exit.
def wine_run(ruby_exe, args, dir:, seconds:, env: {})
  inner = "cd #{dir} && exec wine64 #{ruby_exe} #{args.join(' ')}"
  cmd = [File.join(ROOT, ".ci", "sid-run"), "timeout", "-s", "KILL", seconds.to_s, "env",
         *wine_env(env).map { |k, v| "#{k}=#{v}" }, "sh", "-c", inner]
  FileUtils.mkdir_p(File.join(ROOT, "tmp"))
  Tempfile.create("wine-run", File.join(ROOT, "tmp")) do |log|
    Process.wait(Process.spawn(*cmd, chdir: ROOT, out: log, err: %i[child out]))
    ok = $?.success?
    [File.read(log.path).delete("\r").lines.reject { |l| l.include?("XDG_RUNTIME_DIR") }.join, ok]
  end
end

# Stops the wine server of farce's prefix (wine keeps it running for a while
# after the last program). Debian installs wineserver off PATH.
def stop_wineserver
  system(File.join(ROOT, ".ci", "sid-run"), "env", *wine_env.map { |k, v| "#{k}=#{v}" },
         "/usr/lib/x86_64-linux-gnu/wine/wineserver", "-k", chdir: ROOT, out: File::NULL, err: File::NULL)
end
