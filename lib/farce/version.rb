# frozen_string_literal: true

module Farce
  VERSION = "0.1.0"
end
