# frozen_string_literal: true

module Farce
  class RubyLoop
    # The Ruby loop's timers: a binary min-heap of deadlines. Cancelling
    # marks an entry dead (removed when it reaches the top), so that
    # Timeout blocks that finish in time cost O(log n) and no search.
    class Timers
      Entry = Struct.new(:deadline, :sequence, :target)

      def initialize
        @heap = []
        @sequence = 0
        @live = 0
      end

      # Live timers.
      def size
        @live
      end

      def add(deadline, target)
        @sequence += 1
        entry = Entry.new(deadline, @sequence, target)
        @heap << entry
        sift_up(@heap.size - 1)
        @live += 1
        entry
      end

      def cancel(entry)
        return unless entry.target

        entry.target = nil
        @live -= 1
      end

      # The earliest live deadline, or nil.
      def next_deadline
        drop_dead
        @heap.first&.deadline
      end

      # The target of one timer due at `now` (removed), or nil.
      def pop_due(now)
        drop_dead
        top = @heap.first
        return nil unless top && top.deadline <= now

        remove_top
        target = top.target
        top.target = nil
        @live -= 1
        target
      end

      private

      def drop_dead
        remove_top while (top = @heap.first) && top.target.nil?
      end

      def remove_top
        last = @heap.pop
        return if @heap.empty?

        @heap[0] = last
        sift_down(0)
      end

      def before?(a, b)
        a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence)
      end

      def sift_up(index)
        while index.positive?
          parent = (index - 1) / 2
          break unless before?(@heap[index], @heap[parent])

          @heap[index], @heap[parent] = @heap[parent], @heap[index]
          index = parent
        end
      end

      def sift_down(index)
        size = @heap.size
        loop do
          left = (2 * index) + 1
          break if left >= size

          child = left + 1 < size && before?(@heap[left + 1], @heap[left]) ? left + 1 : left
          break unless before?(@heap[child], @heap[index])

          @heap[index], @heap[child] = @heap[child], @heap[index]
          index = child
        end
      end
    end
  end
end
