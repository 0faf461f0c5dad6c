# frozen_string_literal: true

# Loads the compiled extension. `rake compile` puts one build per Ruby
# version under lib/farce/<major.minor>/ (so several Rubies can share a
# checkout), and so does the precompiled x86_64-linux gem; the source gem,
# compiled at install time, has it directly under farce/.
# Loading it does not start Go: the core library is opened on first use.
begin
  require "farce/#{RUBY_VERSION[/\A\d+\.\d+/]}/farce_shim"
rescue LoadError
  begin
    require "farce/farce_shim"
  rescue LoadError => e
    built_for = Dir[File.join(__dir__, "[0-9]*.[0-9]*", "farce_shim.so")].map { |f| File.basename(File.dirname(f)) }.sort
    hint =
      if built_for.empty?
        "run `rake compile` in the farce checkout, or reinstall the gem"
      else
        "this copy of farce is built for Ruby #{built_for.join(', ')} only; install the source gem, " \
          "which compiles for this Ruby (needs Go and a C compiler): " \
          "`gem install farce --platform ruby` (or `rake compile` in a checkout)"
      end
    detail = built_for.empty? ? " (#{e.message})" : ""
    raise LoadError, "farce's extension is not built for Ruby #{RUBY_VERSION}#{detail}; #{hint}"
  end
end
