# frozen_string_literal: true

module Farce
  # IO#reopen keeps the IO object and its descriptor number but puts another
  # open file behind them (dup2). farce checks which file a number names only
  # when another IO object presents it, so that a wait on the same IO costs
  # no system call; a reopen is the one way Ruby itself changes the file
  # under the same IO. Each reopen is counted, and the next wait of each
  # descriptor on every loop looks at its file again (one fstat), so a
  # registration made for the old file is dropped and the new one armed.
  module ReopenNotice
    def reopen(*arguments, **options, &block)
      super
    ensure
      Farce.__descriptors_reopened if Farce.respond_to?(:__descriptors_reopened)
      RubyLoop.descriptors_reopened
    end
  end
end

IO.prepend(Farce::ReopenNotice)
