# frozen_string_literal: true

module Farce
  # farce runs in any Ractor: each Ractor's threads have their own
  # schedulers, as any thread's do. Ruby allows a non-main Ractor less than
  # the main one: it may read a module's instance variable only when the
  # value is shareable (frozen, deeply), and may set none at all. So farce's
  # constants are shareable, its module-level settings are set in the main
  # Ractor and read everywhere, and what a Ractor must keep for itself (the
  # timeout watcher thread, the Ruby loop's counts) it keeps in its own
  # storage (Ractor#[]), found once per scheduler, not per call.
  #
  # The Ractor that loaded farce: always the main one (lib/farce.rb refuses
  # any other, and Ruby 3.4+ loads every require there).
  MAIN_RACTOR = Ractor.current

  # Whether the calling thread is the main Ractor's.
  def self.main_ractor?
    Ractor.current.equal?(MAIN_RACTOR)
  end

  # The value of the calling Ractor's own slot `key`, made by the block the
  # first time this Ractor asks. Not for the main Ractor, whose state is
  # the modules' own.
  def self.ractor_local(key)
    ractor = Ractor.current
    value = ractor[key]
    value.nil? ? (ractor[key] = yield) : value
  end
end
