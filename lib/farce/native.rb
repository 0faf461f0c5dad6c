# frozen_string_literal: true

# Loads the compiled extension. `rake compile` puts one build per Ruby
# version under lib/farce/<major.minor>/ (so several Rubies can share a
# checkout); an installed gem has it directly under farce/.
# Loading it does not start Go: the core library is opened on first use.
begin
  require "farce/#{RUBY_VERSION[/\A\d+\.\d+/]}/farce_shim"
rescue LoadError
  begin
    require "farce/farce_shim"
  rescue LoadError => e
    raise LoadError, "farce's extension is not built for Ruby #{RUBY_VERSION} (#{e.message}); " \
                     "run `rake compile` in the farce checkout, or reinstall the gem"
  end
end
