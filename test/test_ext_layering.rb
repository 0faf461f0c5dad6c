# frozen_string_literal: true

require_relative "test_helper"

# The C extension's layering, as docs/architecture.md draws it: one folder of
# ext/farce per layer, each including only its own folder and the layers below
# it (a front end may include the loop; the loop never includes a front end),
# one file calling into the Go library, and no circle of includes among the
# files (a file that needs the loop's helpers back from a part of the loop is
# a part that should return codes instead). Reads the C sources, so it skips
# where they are not (a test tree copied beside an installed gem).
class TestExtLayering < Minitest::Test
  EXT = File.expand_path("../ext/farce", __dir__)
  DOOR = "core_access/core_door.c"

  # Top to bottom. A file includes headers of its own folder and of the
  # folders after its own, never of one before it. core/ is the Go package:
  # its farce_core.h is the C ABI, and includes nothing of the extension.
  LAYERS = %w[front_ends hook_io loop core_access platforms core].freeze

  def setup
    skip "no C sources at #{EXT} (not a source tree)" if Dir[File.join(EXT, "*", "*.c")].empty?
  end

  # Every C file and header of the extension, by its path under ext/farce
  # ("loop/event_loop.c"), with the paths of the extension's headers it
  # includes. An include names its folder ("loop/stall.h"), as extconf.rb's
  # -I$(srcdir) resolves it; one that does not is left for the test below to
  # name.
  def includes
    Dir.chdir(EXT) do
      Dir["*/*.{c,h}"].sort.to_h do |path|
        [path, File.read(path).scan(/^\s*#\s*include\s+"([^"]+)"/).flatten]
      end
    end
  end

  # "x.c includes y.h" and "x.h includes y.h" both make the unit x (a .c and
  # its header) depend on y.
  def units(files)
    files.each_with_object(Hash.new { |h, k| h[k] = [] }) do |(path, headers), deps|
      unit = path.sub(/\.[ch]\z/, "")
      headers.each do |header|
        dep = header.sub(/\.h\z/, "")
        deps[unit] << dep unless dep == unit
      end
      deps[unit] # every file is a unit, with or without includes
    end
  end

  # The includes that go up a layer, or leave the layers, as "file -> header".
  def layer_breaks(files)
    files.flat_map do |path, headers|
      own = LAYERS.index(File.dirname(path))
      next ["#{path} is in no layer's folder (#{LAYERS.join(', ')})"] unless own

      headers.filter_map do |header|
        theirs = LAYERS.index(File.dirname(header))
        if theirs.nil? then "#{path} -> #{header} (name the header's folder: #{LAYERS.join(', ')})"
        elsif theirs < own then "#{path} -> #{header} (#{File.dirname(header)} is above #{File.dirname(path)})"
        end
      end
    end
  end

  # The first circle of includes among units, or nil.
  def include_cycle(deps)
    state = {}
    path = []
    visit = lambda do |unit|
      return if state[unit] == :done
      return path[path.index(unit)..] + [unit] if state[unit] == :open

      state[unit] = :open
      path.push(unit)
      deps.fetch(unit, []).each do |dep|
        cycle = deps.key?(dep) && visit.call(dep)
        return cycle if cycle
      end
      path.pop
      state[unit] = :done
      nil
    end
    deps.each_key.lazy.filter_map { |unit| visit.call(unit) }.first
  end

  def test_every_include_stays_in_its_layer_or_goes_down
    files = includes
    refute_empty files
    assert_empty layer_breaks(files), "ext/farce includes that go up a layer (#{LAYERS.join(' > ')})"
  end

  # C files straight in ext/farce, or in a folder the layers do not name,
  # would be held to no rule. (Not the header `go build` writes beside the
  # core's library when extconf.rb's Makefile is run in ext/farce itself.)
  def test_every_c_file_is_in_a_layer
    files = Dir.chdir(EXT) { Dir["**/*.{c,h}"] } - %w[libfarce_core.h farce_core.h]
    folders = files.map { |path| File.dirname(path) }.uniq
    assert_equal LAYERS.sort, folders.sort, "ext/farce's folders of C and the layers this test knows"
  end

  def test_no_include_cycle
    deps = units(includes)
    refute_empty deps
    cycle = include_cycle(deps)
    assert_nil cycle, "ext/farce includes go in a circle: #{cycle&.join(' -> ')}"
  end

  # The rules above, shown to fail: a loop file that includes a front end, a
  # header named without its folder, a file outside every layer, a circle.
  def test_the_rules_catch_what_they_forbid
    breaks = layer_breaks(
      "loop/event_loop.c" => ["front_ends/fiber_scheduler.h", "loop/stall.h", "core/farce_core.h"],
      "hook_io/io_transfer.c" => ["event_loop.h"],
      "stray.c" => []
    )
    assert_equal 3, breaks.size, breaks.inspect
    assert_match(/front_ends is above loop/, breaks[0])
    assert_match(/name the header's folder/, breaks[1])
    assert_match(/in no layer's folder/, breaks[2])
    cycle = include_cycle(units("loop/a.c" => ["loop/b.h"], "loop/b.h" => ["loop/a.h"], "loop/a.h" => []))
    assert_equal %w[loop/a loop/b loop/a], cycle
  end

  # The function table of the loaded Go library (struct farce_core_api) and
  # the dlsym that fills it appear in core_door.c only; every other file
  # calls the typed wrappers of core_door.h.
  def test_only_the_door_sees_the_go_function_table
    sources = Dir.chdir(EXT) { Dir["*/*.{c,h}"] }
    assert_includes sources, DOOR
    seen = sources.select { |p| File.read(File.join(EXT, p)).match?(/\bfarce_core_api\b|->fn\.|\.fn\./) }
    assert_equal [DOOR], seen
  end

  # What differs by platform lives in files named for it (*_unix.c,
  # *_windows.c) or under platforms/, behind one header each: a shared file
  # of the other layers tests no platform in its preprocessor conditionals.
  PLATFORM_TESTS = /^\s*\#\s*(?:if|ifdef|ifndef|elif)\b.*\b(?:_WIN32|_WIN64|__linux__|__APPLE__|__unix__|__MINGW32__|
                    __MINGW64__|_MSC_VER|__FreeBSD__|RWF_NOWAIT|__NR_\w+)\b/x

  def platform_tests(files)
    files.flat_map do |path, text|
      next [] if File.dirname(path) == "platforms" || File.basename(path, ".*").end_with?("_unix", "_windows")

      text.each_line.with_index(1).filter_map { |line, n| "#{path}:#{n}: #{line.strip}" if line.match?(PLATFORM_TESTS) }
    end
  end

  def test_platform_tests_stay_in_platform_files
    files = Dir.chdir(EXT) { Dir["*/*.{c,h}"].to_h { |path| [path, File.read(path)] } }
    refute_empty files
    assert_empty platform_tests(files), "platform tests outside *_unix.c, *_windows.c and platforms/"
  end

  # A line before a signature: the end of a statement or block, a comment, a directive.
  SIGNATURE_END = %r{[;\}]\s*$|^\s*(?:/\*|\*|#)}

  # Lines of each C function whose body opens with "{" alone at column 0
  # (the extension's style), from its signature to the "}" at column 0.
  def function_lengths(path, text)
    lines = text.lines
    lines.each_index.select { |i| lines[i].rstrip == "{" }.map do |open|
      first = open
      first -= 1 while first.positive? && !lines[first - 1].strip.empty? && lines[first - 1] !~ SIGNATURE_END
      close = (open + 1...lines.size).find { |j| lines[j].start_with?("}") }
      ["#{path}:#{first + 1}", close - first + 1]
    end
  end

  MAX_FUNCTION_LINES = 80

  def test_no_function_is_longer_than_a_screen
    long = Dir.chdir(EXT) { Dir["*/*.c"].sort.flat_map { |path| function_lengths(path, File.read(path)) } }
                .select { |_, n| n > MAX_FUNCTION_LINES }
    assert_empty long, "C functions longer than #{MAX_FUNCTION_LINES} lines"
  end

  # The two rules above, shown to fail: a shared loop file that tests for
  # Windows, and a function of 81 lines.
  def test_the_platform_and_length_rules_catch_what_they_forbid
    found = platform_tests("loop/x.c" => "#include <a.h>\n#ifdef _WIN32\n#endif\n", "loop/x_windows.c" => "#ifdef _WIN32\n",
                           "platforms/y.h" => "#if defined(__linux__)\n", "hook_io/z.c" => "# if defined(RWF_NOWAIT)\n")
    assert_equal ["loop/x.c:2: #ifdef _WIN32", "hook_io/z.c:1: # if defined(RWF_NOWAIT)"], found
    text = "/* f */\nstatic int f(int a,\n          int b)\n{\n#{"    a++;\n" * 77}}\n"
    assert_equal [["t.c:2", 81]], function_lengths("t.c", text)
  end
end
