# frozen_string_literal: true

module Bench
  # wrk prints durations with a unit suffix ("812.00us", "1.93ms", "2.01s",
  # "1.00m"); both bench/runner.rb and bench/async_http.rb read them.
  module WrkTime
    module_function

    # The duration text in milliseconds.
    def to_ms(text)
      value = text.to_f
      case text
      when /us\z/ then value / 1000.0
      when /ms\z/ then value
      when /m\z/ then value * 60_000.0
      when /s\z/ then value * 1000.0
      else value
      end
    end
  end
end
