# frozen_string_literal: true

require_relative "test_helper"

# docs/architecture.md is the map a newcomer reads before the code: every
# file of lib/, ext/farce/ and internal/ must appear in it, and every C or Go
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
      name = path.sub(%r{\A(lib/|ext/farce/(core/)?|internal/\w+/)}, "")
      doc.include?(name) || (name.end_with?(".h") && doc.include?(name.sub(/\.h\z/, ".c/.h")))
    end
    assert_empty missing, "files docs/architecture.md does not name"
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

  def git?
    system("git", "-C", ROOT, "rev-parse", "--git-dir", out: File::NULL, err: File::NULL)
  end

  def git(*args)
    IO.popen(["git", "-C", ROOT, *args], &:read)
  end
end
