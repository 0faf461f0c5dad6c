# frozen_string_literal: true

# Why the libraries an io_event test file needs cannot be loaded on this
# Ruby, or nil when they all load. The files skip with the reason where they
# are missing (the host's Ruby 3.1 has no Async or io-event).
module IOEventTestLibraries
  def self.missing(what, *features)
    features.each { |feature| require feature }
    nil
  rescue LoadError => e
    "#{what} not available on Ruby #{RUBY_VERSION} (#{e.message})"
  end
end
