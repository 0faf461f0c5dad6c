# frozen_string_literal: true

require_relative "test_helper"

# The C extension's layering, as docs/architecture.md draws it: one file calls
# into the Go library, and the files' includes form no circle (a file that
# needs the loop's helpers back from a part of the loop is a part that should
# return codes instead). Reads the C sources, so it skips where they are not
# (a test tree copied beside an installed gem).
class TestExtLayering < Minitest::Test
  EXT = File.expand_path("../ext/farce", __dir__)
  DOOR = "core_door.c"

  def setup
    skip "no C sources at #{EXT} (not a source tree)" if Dir[File.join(EXT, "*.c")].empty?
  end

  # A unit is a .c file and the header of the same name: "x.c includes y.h"
  # and "x.h includes y.h" both make x depend on y.
  def units
    Dir[File.join(EXT, "*.{c,h}")].each_with_object(Hash.new { |h, k| h[k] = [] }) do |path, deps|
      unit = File.basename(path).sub(/\.[ch]\z/, "")
      File.read(path).scan(/^\s*#\s*include\s+"([^"]+)\.h"/).flatten.each do |header|
        header = File.basename(header)
        deps[unit] << header unless header == unit
      end
      deps[unit] # every file is a unit, with or without includes
    end
  end

  def test_no_include_cycle
    deps = units
    refute_empty deps
    state = {}
    path = []
    visit = lambda do |unit|
      return if state[unit] == :done

      if state[unit] == :open
        cycle = path[path.index(unit)..] + [unit]
        flunk "ext/farce includes go in a circle: #{cycle.join(' -> ')}"
      end
      state[unit] = :open
      path.push(unit)
      deps.fetch(unit, []).each { |dep| visit.call(dep) if deps.key?(dep) }
      path.pop
      state[unit] = :done
    end
    deps.each_key { |unit| visit.call(unit) }
  end

  # The function table of the loaded Go library (struct farce_core_api) and
  # the dlsym that fills it appear in core_door.c only; every other file
  # calls the typed wrappers of core_door.h.
  def test_only_the_door_sees_the_go_function_table
    sources = Dir[File.join(EXT, "*.{c,h}")]
    assert_includes sources.map { |p| File.basename(p) }, DOOR
    seen = sources.select { |p| File.read(p).match?(/\bfarce_core_api\b|->fn\.|\.fn\./) }
    assert_equal [DOOR], seen.map { |p| File.basename(p) }
  end
end
