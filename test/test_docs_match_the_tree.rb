# frozen_string_literal: true

require_relative "test_helper"

# docs/architecture.md is the map a newcomer reads before the code: every
# file of lib/, ext/farce/ and internal/ must appear in it (ext/farce's under
# the heading of its folder, the layer it is in), and every C or Go
# name it cites must exist, or the map has drifted from the tree. Needs a git
# checkout (the list of files and `git grep`); an installed gem has none.
class TestDocsMatchTheTree < Minitest::Test
  ROOT = File.expand_path("..", __dir__)
  ARCHITECTURE = File.join(ROOT, "docs", "architecture.md")
  DIRS = %w[lib ext/farce internal].freeze

  def setup
    skip "not a git checkout (#{ROOT}): the map is checked against git's list of files" unless git?
  end

  def test_every_file_appears_in_the_architecture_map
    doc = File.read(ARCHITECTURE)
    missing = git("ls-files", "--", *DIRS).split("\n").reject do |path|
      next true if path.start_with?("ext/farce/") # the test below holds each to its folder

      named?(doc, path.sub(%r{\A(lib/|internal/\w+/)}, ""))
    end
    assert_empty missing, "files docs/architecture.md does not name"
  end

  # The extension's folders are its layers: the map draws each folder of
  # ext/farce as a heading of its own, and every file under the heading of
  # the folder it is in (a file moved to another layer moves in the map).
  def test_every_extension_file_appears_under_its_folder
    sections = map_sections(File.read(ARCHITECTURE))
    misplaced = git("ls-files", "--", "ext/farce").split("\n").reject do |path|
      section = sections[File.dirname(path) + "/"]
      section && named?(section, File.basename(path))
    end
    assert_empty misplaced, "ext/farce files docs/architecture.md does not list under their folder's heading"
  end

  # A map whose loop heading lost a file, and one that lists a loop file under
  # the front ends, fail the check above.
  def test_a_file_under_another_folder_is_not_found
    sections = map_sections(<<~DOC)
      ```
      ext/farce/front_ends/  (the faces)
        extension.c                   Init
        event_loop.c/.h               listed here by mistake
      ext/farce/loop/  (the loop)
        wait_table.c/.h               the waits
      ```
    DOC
    assert named?(sections["ext/farce/loop/"], "wait_table.h")
    refute named?(sections["ext/farce/loop/"], "event_loop.c")
    refute named?(sections["ext/farce/loop/"], "extension.c")
  end

  # The C and Go names the docs cite in backquotes: farce_* and FARCE_* in C,
  # sched.X and driver.X in Go.
  def test_every_name_the_docs_cite_exists
    cited = %w[architecture.md cgo-hazards.md].flat_map do |doc|
      File.read(File.join(ROOT, "docs", doc)).scan(/`([^`\n]+)`/).flatten
    end
    names = cited.flat_map { |text| text.scan(/\b(?:farce_\w+|FARCE_[A-Z_]+|(?:sched|driver)\.[A-Z]\w*)/) }.uniq
    refute_empty names
    missing = names.reject do |name|
      word = name.sub(/\A(sched|driver)\./, "")
      system("git", "-C", ROOT, "grep", "-q", "-w", "-e", word, "--", *DIRS, "rakelib", "Rakefile", out: File::NULL)
    end
    assert_empty missing, "names the docs cite that the code does not have"
  end

  private

  # The map's file tree (its first code block), cut at each heading: an
  # unindented line opens the section of the folder it names ("ext/farce/loop/").
  def map_sections(doc)
    tree = doc[/^```\n(.*?)^```/m, 1].to_s
    tree.each_line.slice_before { |line| !line.start_with?(" ") }.to_h do |lines|
      [lines.first.split.first, lines.join]
    end
  end

  # A file is named as itself, or a header as "x.c/.h" with its source.
  def named?(text, name)
    text.include?(name) || (name.end_with?(".h") && text.include?(name.sub(/\.h\z/, ".c/.h")))
  end

  def git?
    system("git", "-C", ROOT, "rev-parse", "--git-dir", out: File::NULL, err: File::NULL)
  end

  def git(*args)
    IO.popen(["git", "-C", ROOT, *args], &:read)
  end
end
