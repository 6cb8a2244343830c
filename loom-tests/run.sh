#!/usr/bin/env bash
# Runs tagpool's loom models, then proves that they can fail:
#   1. every model, normally: all must pass;
#   2. with --cfg tagpool_loom_no_aba_tag (the head's tag never changes):
#      the ABA model must fail;
#   3. with --cfg tagpool_loom_weak_push (the push CAS is Relaxed instead of
#      Release): the exclusivity models must fail;
#   4. with --cfg tagpool_loom_clear_any (a releaser clears the waiter flag
#      from whatever the head is now): the clearing model must deadlock;
#   5. the per-thread cache protocol's faults (tests/cache.rs), each caught
#      by the model named on its line below: an owner that ignores
#      `revoked`, a revoker that ignores `BUSY` or checks it only before
#      it claims a magazine (not after its heavy barrier), either half of the
#      asymmetric barrier missing, an owner that keeps the length of a
#      stack a revoker drained, an owner that gives up on its own stack
#      while a revoker claims it and sweeps that do not take claims over
#      (a try-acquire racing the revoker then fails with slots free), an
#      owner that takes a claim back by a plain store and a revoker that
#      commits by one (both then in the stack), owners that never flush
#      for waiters, an
#      inlined fast acquire that does not flush for them,
#      sweeps that never recover cached slots, an exhausted pop's shortcut
#      that does not look at the caches, and a waiter's covered mark
#      that outlives the waiting that made it (a later waiter skips the
#      sweep it needs);
#   6. with --cfg tagpool_loom_frozen_tag (a pop's retry reuses the tag read
#      before its loop, folly's old bug): the retried-pop model must fail;
#   7. the owned-guard lifetime faults (tests/cache.rs): an owned release
#      that leaves no tail for the pool's drop to wait for, and a seal that
#      reads a magazine's count while its owner is busy: the model of an
#      owned release racing the pool's drop must fail; and an owner that
#      takes a drained magazine back with a plain store instead of a CAS
#      (it can overwrite the seal): the model of that take-back racing the
#      seal must fail.
#   8. the waiting faults of async acquires, fair hand-off and close
#      (tests/waiters.rs): a future that returns `Pending` with a ticket
#      that holds no waker of its task, a cancelled waiter that drops the
#      slot its ticket was handed, a fair release that leaves the served
#      ticket queued, a close that wakes nobody, and a fair hand-off
#      that leaves its waiter no peak to record.
#   9. the elastic storage and trimming faults (tests/grow.rs): two threads
#      that grow the same segment, a growth that moves the values it has
#      (reading a held one), a growth claim kept after its allocation
#      unwound (the other threads wait for it forever), a trim that takes
#      values from slots it does not own, and, for a cache's batch walk
#      racing a growth, a walk that reads links with `get` (it panics on a
#      segment it does not see yet) and a segment published with a Relaxed
#      swap.
#  10. the handle pool's and scopes' faults (tests/handle.rs,
#      tests/scope.rs): a remove that keeps the generation (a stale handle
#      sees the successor), an eviction that ignores readers (a value torn
#      out from under a `Ref`), an eviction that takes a free entry (under
#      its remover), a read whose load and CAS are Relaxed (a handle sent
#      through a Relaxed atomic, or one that `insert_with_key` hands its
#      closure, reads an unpublished value), a retired
#      entry (its last generation spent) given back to the free list (an
#      insert takes it, and making a handle of generation 0 panics), a
#      generation that wraps to 1 instead of retiring the entry (an insert
#      gets it again), a take that ignores the readers (it moves a value
#      out from under a `Ref`), and a scope that pushes its batch before
#      it resets the values (the reset writes a slot another thread
#      holds); and a release that pushes its slot before the discard
#      check empties it (tests/discard.rs: the discard writes a slot
#      another thread holds); and for a handle pool built with `initial`,
#      a segment of entries published by a plain swap (the insert that
#      lost the race to allocate it replaces the winner's, whose value is
#      lost), and a growth that finds every segment grown and refuses
#      without looking at the free list again (the last growth's slots
#      are free: an insert is refused in a pool with room); and the chain
#      of entries vacated through `&mut self` popped through `&self` by a
#      plain load and store (two inserts take the same entry).
#  10b. the exhausted shortcut that reads the head before the growth
#      (tests/grow.rs: it refuses with a grown slot free), an attach whose
#      hand-off counts its target as held (tests/waiters.rs: the peak reads
#      2), and a handle pool's high mark raised by a plain store
#      (tests/handle.rs: a walk after two racing inserts misses one).
#  11. the starvation bound's faults (tests/starving.rs): a starving waiter
#      that counts itself after the flag CAS that queues its ticket (a
#      release reads the flag, misses the ticket and clears the flag), and
#      a barging pool's ticket queue that clears the flag when it empties,
#      as a fair pool's does (a listener registered meanwhile is lost); and
#      the same late count with a waiting task (tasks queue tickets at
#      once), and a release's direct hand-off to a queued ticket that
#      leaves the ticket queued.
#  12. the waiting protocol's matrix (tests/matrix.rs): every cell, barging
#      or fair x caches off or on x plain or elastic x a blocked thread or
#      a task, in each race it has (`release`: a release racing the
#      registration; `cached`: a cached slot a waiter must find, caches
#      only; `cancel`: a waiter giving up as a release hands it the slot),
#      fails with a fault of its own: a Relaxed push (a thread served
#      through the free list reads an unpublished value), a ticket that
#      holds no waker of its task, owners that never flush for waiters, a
#      fair release that pushes over queued tickets, sweeps that do not
#      take another revoker's claim over (the hang of issue 35), a
#      cancelled task that drops its handed slot, and a timed-out fair
#      thread that drops its handed slot. An owner that skips its flush
#      before it waits, and a release that skips it before it pushes to
#      the free list while anyone waits (tests/cache.rs), deadlock their
#      models too.
#  13. the read sections' faults (tests/sections.rs): removals that never
#      defer (a section then reads a dropped or a successor's value, also
#      when the remove races the pool's first section, and under an
#      eviction), a section that announces the next epoch, a section with
#      no barrier between its announcement and its loads, a section whose
#      compare of an entry's word with the key leaves the generation out
#      (a stale key then reads the successor's value), a grace period
#      that frees whatever it looks at (also what a forgotten section
#      keeps), a take that skips its grace period, a pool's drop that
#      forgets the evicted values awaiting one (`on_evict` never gets
#      them), the end of a nested section ending the thread's
#      announcement, an insert that gives up on the entries another
#      thread's grace period holds, and the bags of removed entries'
#      protocol broken on either side (an owner that ignores a grace
#      period's claim, a grace period that reads a busy bag).
#  14. the server pools' faults (tests/pool.rs): a factory that runs (and
#      fails) on an empty slot while another thread's cache holds idle
#      values; a shared value's last drop that resets it before another
#      share's reads end (a Relaxed decrement, no fence), and a
#      `try_unwrap` that takes the guard back before them (a Relaxed load).
#  15. the movable bound's faults (tests/capacity.rs): pushes that never
#      withdraw a slot while a lowered bound is owed (a released slot then
#      serves past the bound: after the lowering, to a waiter, a task, or
#      a fair pool's ticket), a debt never announced on the head (the
#      pushes never look), a lowering that leaves the caches' slots in
#      them (their owner serves itself past the bound), a raise that
#      gives a slot back without waking the waiter (deadlock), a hand-off
#      that checks the debt before the ticket queue's lock (a ticket
#      queued after the lowering is handed the slot), and a waiter that
#      parks whatever room a raise gave (deadlock: nobody grows).
#  16. reserved keys' faults (tests/reserve.rs): a reservation marked as
#      a live value (a read reads a value never written; an eviction takes
#      it), a fill that takes any pool's reservation (it writes an entry
#      this pool's own reservation holds), and the reservations' bound
#      read Relaxed (a reservation under it skips the high mark without
#      seeing its raise: a clone misses the reserved entry).
# Every flavour builds in target/loom (see run_models), apart from the
# normal build. Each model prints its iteration count and
# time; LOOM_MAX_PREEMPTIONS overrides every model's own bound (2 or 3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$here"

step() { printf '\n== %s\n' "$*"; }
seconds() { date +%s; }

# Every flavour builds in one target directory: the faults reach tagpool
# through TAGPOOL_LOOM_FAULTS (its build script turns the names into cfgs),
# not RUSTFLAGS, so a new fault rebuilds tagpool and the models only, not
# loom and the other dependencies. The lines below are grouped by fault,
# so each fault builds once.
run_models() { # faults test-args...
    local cfg=$1
    shift
    TAGPOOL_LOOM_FAULTS="${cfg//--cfg /}" RUSTFLAGS="--cfg loom" \
        cargo test --release --target-dir "${LOOM_TARGET:-$root/target/loom}" "$@" \
        -- --nocapture --test-threads=1
}

log=$(mktemp)
trap 'rm -f "$log" "$log".lane*' EXIT

start=$(seconds)
step "loom models (all must pass)"
status=0
run_models "" >"$log" 2>&1 || status=$?
grep -oE 'loom model .*|.*panicked.*|^error.*|.*FAILED.*' "$log" || true
if [ "$status" -ne 0 ]; then
    tail -30 "$log"
    echo "FAIL: a loom model failed"
    exit 1
fi

# The faults run after every model passed, on `TAGPOOL_LOOM_LANES` lanes
# (2 by default: CI has two cores, and each fault rebuilds tagpool and runs
# one model on one core). `expect_failure` only records a fault; the lanes
# run them at the end of this file. A lane has a target directory of its
# own and takes whole groups of lines with the same fault, so that a fault
# builds once per lane; a lane stops at its first failure.
jobs=()
expect_failure() { # name cfg test-binary test-name
    jobs+=("${LOOM_MAX_PREEMPTIONS:-}|$1|$2|$3|$4")
}

check_failure() { # name cfg test-binary test-name
    local name=$1 cfg=$2 bin=$3 test=$4 out
    step "$name: $test must fail"
    if out=$(run_models "$cfg" --test "$bin" "$test" 2>&1); then
        echo "$out" | tail -5
        echo "FAIL: $test passed with $cfg: the models cannot see this bug"
        exit 1
    fi
    # A build error would also fail: demand that the model itself panicked.
    # (Here-strings, not `echo | grep -q`: under pipefail, a grep that
    # matches and exits early makes the echo's write fail with SIGPIPE, and
    # the pipeline with it, so a fault that was caught read as not run.)
    if ! grep -q "^test $test \.\.\. FAILED\|panicked at" <<<"$out"; then
        echo "$out" | tail -20
        echo "FAIL: $test did not run"
        exit 1
    fi
    grep -m 3 -E 'panicked at|violation|assert' <<<"$out" || true
    echo "ok: $test failed with $cfg, as it must"
}

expect_failure "no ABA tag" "--cfg tagpool_loom_no_aba_tag" free_list aba_reordered_release
expect_failure "Relaxed push" "--cfg tagpool_loom_weak_push" free_list exclusive_two_threads_capacity_1
expect_failure "clear any flag" "--cfg tagpool_loom_clear_any" wait clear_after_a_second_push_keeps_a_new_waiter

expect_failure "owner ignores revoked" "--cfg tagpool_loom_ignore_revoked" cache owner_races_revoker
expect_failure "revoker ignores BUSY" "--cfg tagpool_loom_ignore_busy" cache owner_races_revoker
expect_failure "revoker checks BUSY before claiming only" "--cfg tagpool_loom_busy_before_claim" cache owner_races_revoker
expect_failure "no light barrier" "--cfg tagpool_loom_no_light_barrier" cache owner_races_revoker
expect_failure "no heavy barrier" "--cfg tagpool_loom_no_heavy_barrier" cache owner_races_revoker
expect_failure "owner keeps a drained length" "--cfg tagpool_loom_keep_drained_len" cache drained_cache_is_taken_back_empty
expect_failure "owner gives up on a claimed stack, no takeover" "--cfg tagpool_loom_owner_gives_up --cfg tagpool_loom_no_claim_takeover" cache racing_try_acquires_take_every_slot
expect_failure "claim taken back by a store" "--cfg tagpool_loom_reclaim_store" cache owner_races_revoker
expect_failure "commit by a store" "--cfg tagpool_loom_commit_store" cache owner_races_revoker
expect_failure "no waiter flush" "--cfg tagpool_loom_no_waiter_flush" cache release_while_waiting_reaches_waiter
expect_failure "fast acquire skips the flush" "--cfg tagpool_loom_acquire_no_flush" cache fast_acquire_flushes_for_a_waiter
expect_failure "no sweep" "--cfg tagpool_loom_no_sweep" cache parked_slot_taken_from_idle_thread
expect_failure "exhausted pop ignores the caches" "--cfg tagpool_loom_exhausted_ignores_caches" cache parked_slot_taken_from_idle_thread
expect_failure "covered mark outlives its waiters" "--cfg tagpool_loom_covered_stale" cache covered_mark_ends_with_its_waiters
expect_failure "tag frozen before the retry loop" "--cfg tagpool_loom_frozen_tag" cache retried_pop_bumps_the_current_tag
expect_failure "owned release without a tail" "--cfg tagpool_loom_no_tail" cache owned_release_races_pool_drop
expect_failure "seal ignores a busy owner" "--cfg tagpool_loom_seal_busy" cache owned_release_races_pool_drop
expect_failure "drained mark cleared by a store" "--cfg tagpool_loom_drained_store" cache drained_take_back_races_the_seal

expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" waiters async_waiter_wakes_on_release
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" waiters cancelled_waiter_passes_the_slot_on
expect_failure "served ticket stays queued" "--cfg tagpool_loom_fair_keep_ticket" waiters fair_hand_off_is_exclusive_and_loses_nothing
expect_failure "close wakes nobody" "--cfg tagpool_loom_close_no_notify" waiters close_races_a_release_and_waiters
expect_failure "fair hand-off leaves no peak" "--cfg tagpool_loom_fair_peak_unrecorded" waiters fair_hand_off_of_an_idle_slot_counts_towards_the_peak
expect_failure "attach's target counted as held" "--cfg tagpool_loom_attach_target_held" waiters attach_hands_an_idle_slot_to_a_fair_waiter

expect_failure "segment grown twice" "--cfg tagpool_loom_grow_unclaimed" grow threads_race_to_grow
expect_failure "growth claim kept after an unwind" "--cfg tagpool_loom_grow_claim_kept" grow unwound_growth_gives_its_claim_back
expect_failure "growth moves values" "--cfg tagpool_loom_grow_moves" grow guard_held_across_a_growth
expect_failure "walk reads links with get" "--cfg tagpool_loom_walk_get" grow batch_walk_races_a_growth
expect_failure "segment published Relaxed" "--cfg tagpool_loom_grow_relaxed" grow batch_walk_races_a_growth
expect_failure "trim takes unowned values" "--cfg tagpool_loom_trim_unowned" grow trim_races_an_acquire
expect_failure "exhausted shortcut reads the head first" "--cfg tagpool_loom_exhausted_head_first" grow exhausted_shortcut_races_a_growth

expect_failure "remove keeps the generation" "--cfg tagpool_loom_handle_no_generation" handle stale_handle_races_remove_and_reinsert
expect_failure "eviction ignores readers" "--cfg tagpool_loom_evict_ignores_readers" handle eviction_races_an_access
expect_failure "eviction takes a free entry" "--cfg tagpool_loom_evict_free" handle eviction_races_a_remove
expect_failure "Relaxed read" "--cfg tagpool_loom_read_relaxed" handle handle_sent_through_a_relaxed_atomic
expect_failure "retired entry reused" "--cfg tagpool_loom_retire_reuses" handle last_generation_retires_under_a_reader
expect_failure "retired entry reused by an eviction" "--cfg tagpool_loom_retire_reuses" handle eviction_retires_the_last_generation_under_a_reader
expect_failure "generation wraps" "--cfg tagpool_loom_generation_wraps" handle last_generation_retires_under_a_reader
expect_failure "generation wraps under an eviction" "--cfg tagpool_loom_generation_wraps" handle eviction_retires_the_last_generation_under_a_reader
expect_failure "Relaxed read of insert_with_key's key" "--cfg tagpool_loom_read_relaxed" handle insert_with_key_sends_its_key_before_the_value_is_published
expect_failure "entries' segment overwritten" "--cfg tagpool_loom_entries_overwrite" handle inserts_race_to_allocate_a_segment_of_entries
expect_failure "exhausted growth without a last pop" "--cfg tagpool_loom_grow_full_no_pop" handle inserts_race_to_allocate_a_segment_of_entries
expect_failure "vacated entries popped without a CAS" "--cfg tagpool_loom_vacant_pop_racy" handle inserts_race_to_take_entries_vacated_through_mut
expect_failure "high mark raised by a store" "--cfg tagpool_loom_high_mark_store" handle racing_inserts_raise_the_high_mark
expect_failure "take ignores readers" "--cfg tagpool_loom_take_ignores_readers" handle take_races_an_access
expect_failure "scope resets after its push" "--cfg tagpool_loom_scope_reset_late" scope scope_batch_races_an_acquire
expect_failure "discard after the push" "--cfg tagpool_loom_discard_late" discard discard_races_an_acquire

expect_failure "starving count after the flag CAS" "--cfg tagpool_loom_starving_late" starving starving_waiter_is_served_while_another_barges
expect_failure "ticket queue clears the flag" "--cfg tagpool_loom_ticket_clears_flag" starving hand_off_keeps_a_listeners_flag
expect_failure "waiting task counted late" "--cfg tagpool_loom_starving_late" starving waiting_task_is_served_while_another_barges
expect_failure "direct hand-off keeps the ticket" "--cfg tagpool_loom_fair_keep_ticket" starving queued_tasks_are_each_handed_the_slot_once


# The matrix (item 12): one line per cell.
expect_failure "Relaxed push" "--cfg tagpool_loom_weak_push" matrix release_barging_uncached_plain_thread
expect_failure "Relaxed push" "--cfg tagpool_loom_weak_push" matrix release_barging_uncached_elastic_thread
expect_failure "Relaxed push" "--cfg tagpool_loom_weak_push" matrix cancel_barging_uncached_plain_thread
expect_failure "Relaxed push" "--cfg tagpool_loom_weak_push" matrix cancel_barging_uncached_elastic_thread
expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" matrix release_barging_uncached_plain_task
expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" matrix release_barging_uncached_elastic_task
expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" matrix release_barging_cached_plain_task
expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" matrix release_barging_cached_elastic_task
expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" matrix release_fair_plain_task
expect_failure "ticket without the task's waker" "--cfg tagpool_loom_async_ticket_no_waker" matrix release_fair_elastic_task
expect_failure "no waiter flush" "--cfg tagpool_loom_no_waiter_flush" matrix release_barging_cached_plain_thread
expect_failure "no waiter flush" "--cfg tagpool_loom_no_waiter_flush" matrix release_barging_cached_elastic_thread
expect_failure "no waiter flush" "--cfg tagpool_loom_no_waiter_flush" matrix cancel_barging_cached_plain_thread
expect_failure "no waiter flush" "--cfg tagpool_loom_no_waiter_flush" matrix cancel_barging_cached_elastic_thread
expect_failure "fair release pushes over tickets" "--cfg tagpool_loom_fair_push_over_waiters" matrix release_fair_plain_thread
expect_failure "fair release pushes over tickets" "--cfg tagpool_loom_fair_push_over_waiters" matrix release_fair_elastic_thread
expect_failure "no claim takeover" "--cfg tagpool_loom_no_claim_takeover" matrix cached_barging_plain_thread
expect_failure "no claim takeover" "--cfg tagpool_loom_no_claim_takeover" matrix cached_barging_plain_task
expect_failure "no claim takeover" "--cfg tagpool_loom_no_claim_takeover" matrix cached_barging_elastic_thread
expect_failure "no claim takeover" "--cfg tagpool_loom_no_claim_takeover" matrix cached_barging_elastic_task
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" matrix cancel_barging_uncached_plain_task
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" matrix cancel_barging_uncached_elastic_task
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" matrix cancel_barging_cached_plain_task
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" matrix cancel_barging_cached_elastic_task
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" matrix cancel_fair_plain_task
expect_failure "cancel drops a handed slot" "--cfg tagpool_loom_cancel_drops_slot" matrix cancel_fair_elastic_task
expect_failure "timeout drops a handed slot" "--cfg tagpool_loom_timeout_drops_slot" matrix cancel_fair_plain_thread
expect_failure "timeout drops a handed slot" "--cfg tagpool_loom_timeout_drops_slot" matrix cancel_fair_elastic_thread
expect_failure "flush skipped before a wait" "--cfg tagpool_loom_wait_skips_flush" cache owner_flushes_before_it_waits
# Bound 2 for this fault: see the model's docs.
LOOM_MAX_PREEMPTIONS=2 expect_failure "release skips the flush" "--cfg tagpool_loom_release_skips_flush" cache full_cache_release_flushes_for_waiters

expect_failure "removals never defer" "--cfg tagpool_loom_section_never_defers" sections section_races_remove_and_reinsert
expect_failure "removals never defer" "--cfg tagpool_loom_section_never_defers" sections section_races_an_eviction
expect_failure "removals never defer" "--cfg tagpool_loom_section_never_defers" sections first_section_races_a_remove
expect_failure "removals never defer" "--cfg tagpool_loom_section_never_defers" sections section_races_the_pools_drop
expect_failure "section announces the next epoch" "--cfg tagpool_loom_section_epoch_ahead" sections section_races_remove_and_reinsert
expect_failure "section without its barrier" "--cfg tagpool_loom_section_no_barrier" sections section_races_remove_and_reinsert
expect_failure "section compares the index, not the key" "--cfg tagpool_loom_section_key_index_only" sections section_races_remove_and_reinsert
expect_failure "grace period frees everything" "--cfg tagpool_loom_grace_keeps_nothing" sections section_races_remove_and_reinsert
expect_failure "grace period frees everything" "--cfg tagpool_loom_grace_keeps_nothing" sections a_forgotten_section_keeps_only_later_removals
expect_failure "take skips its grace period" "--cfg tagpool_loom_take_skips_grace" sections take_races_a_section
expect_failure "drop forgets the limbo" "--cfg tagpool_loom_drop_forgets_limbo" sections section_races_an_eviction
expect_failure "nested exit ends the section" "--cfg tagpool_loom_section_exit_clears" sections nested_sections_race_a_remove
expect_failure "insert gives up on a walk" "--cfg tagpool_loom_insert_skips_walk" sections insert_races_a_grace_period
expect_failure "bag owner ignores claims" "--cfg tagpool_loom_bag_ignores_claim" sections a_bag_races_a_grace_period
expect_failure "grace period reads a busy bag" "--cfg tagpool_loom_bag_ignores_busy" sections a_bag_races_a_grace_period

expect_failure "factory before idle values" "--cfg tagpool_loom_factory_before_idle" pool idle_value_in_another_cache_is_served_before_a_failing_factory
expect_failure "shares drop Relaxed" "--cfg tagpool_loom_share_relaxed_drop" pool shares_read_on_two_threads_reset_once_after_every_read
expect_failure "try_unwrap loads Relaxed" "--cfg tagpool_loom_share_unwrap_relaxed" pool try_unwrap_races_a_shares_drop_with_the_handle_gone

expect_failure "pushes ignore the debt" "--cfg tagpool_loom_push_ignores_debt" capacity lowering_races_a_release_uncached
expect_failure "pushes ignore the debt" "--cfg tagpool_loom_push_ignores_debt" capacity lowering_races_a_release_cached
expect_failure "pushes ignore the debt" "--cfg tagpool_loom_push_ignores_debt" capacity thread_waits_for_the_bound
expect_failure "pushes ignore the debt" "--cfg tagpool_loom_push_ignores_debt" capacity task_waits_for_the_bound
expect_failure "pushes ignore the debt" "--cfg tagpool_loom_push_ignores_debt" capacity fair_waiter_waits_for_the_bound
expect_failure "debt never announced" "--cfg tagpool_loom_debt_unannounced" capacity lowering_races_a_release_uncached
expect_failure "debt never announced" "--cfg tagpool_loom_debt_unannounced" capacity thread_waits_for_the_bound
expect_failure "lowering skips the sweep" "--cfg tagpool_loom_lower_skips_sweep" capacity lowering_races_a_release_cached
expect_failure "raise forgets the waiters" "--cfg tagpool_loom_raise_forgets_waiters" capacity raise_serves_a_waiting_thread
expect_failure "raise forgets the waiters" "--cfg tagpool_loom_raise_forgets_waiters" capacity raise_serves_a_waiting_task
expect_failure "debt checked before the lock" "--cfg tagpool_loom_debt_checked_early" capacity fair_thread_after_the_lowering
expect_failure "debt checked before the lock" "--cfg tagpool_loom_debt_checked_early" capacity task_after_the_lowering
expect_failure "waiter ignores the room" "--cfg tagpool_loom_register_ignores_room" capacity raise_races_an_arriving_thread
expect_failure "waiter ignores the room" "--cfg tagpool_loom_register_ignores_room" capacity raise_races_an_arriving_task
expect_failure "waiter ignores the room" "--cfg tagpool_loom_register_ignores_room" capacity raise_races_an_arriving_fair_thread

expect_failure "reservation marked occupied" "--cfg tagpool_loom_reserve_as_occupied" reserve fill_races_a_stale_lookup
expect_failure "reservation marked occupied" "--cfg tagpool_loom_reserve_as_occupied" reserve reserve_races_an_eviction
expect_failure "fill takes any pool's reservation" "--cfg tagpool_loom_fill_any_pool" reserve fill_races_a_reservation_of_another_pool
expect_failure "reservations' bound read Relaxed" "--cfg tagpool_loom_reserve_bound_relaxed" reserve a_clone_sees_a_reservation_that_skipped_the_high_mark

run_lane() { # lane job...
    local lane=$1 job bound name cfg bin test
    shift
    for job in "$@"; do
        IFS='|' read -r bound name cfg bin test <<<"$job"
        (
            if [ -n "$bound" ]; then export LOOM_MAX_PREEMPTIONS=$bound; else unset LOOM_MAX_PREEMPTIONS; fi
            export LOOM_TARGET="$root/target/loom$([ "$lane" -eq 0 ] || echo "-lane$lane")"
            check_failure "$name" "$cfg" "$bin" "$test"
        ) || return 1
    done
}

lanes=${TAGPOOL_LOOM_LANES:-2}
# Deal the groups of lines with the same fault to the lane with the fewest
# lines so far, in order of first appearance.
declare -A group_lane
declare -a lane_jobs lane_count
for ((l = 0; l < lanes; l++)); do lane_jobs[l]=""; lane_count[l]=0; done
for job in "${jobs[@]}"; do
    IFS='|' read -r _ _ cfg _ _ <<<"$job"
    if [ -z "${group_lane[$cfg]+set}" ]; then
        best=0
        for ((l = 1; l < lanes; l++)); do
            [ "${lane_count[l]}" -lt "${lane_count[best]}" ] && best=$l
        done
        group_lane[$cfg]=$best
    fi
    l=${group_lane[$cfg]}
    lane_jobs[l]+="$job"$'\n'
    lane_count[l]=$((lane_count[l] + 1))
done
pids=()
for ((l = 0; l < lanes; l++)); do
    mapfile -t mine < <(printf '%s' "${lane_jobs[l]}")
    run_lane "$l" "${mine[@]}" >"$log.lane$l" 2>&1 &
    pids+=($!)
done
failed=0
for ((l = 0; l < lanes; l++)); do
    wait "${pids[l]}" || failed=1
    printf '\n== lane %d of %d (%d faults)\n' "$((l + 1))" "$lanes" "${lane_count[l]}"
    cat "$log.lane$l"
    rm -f "$log.lane$l"
done
if [ "$failed" -ne 0 ]; then
    echo "FAIL: a planted fault was not caught (see the lanes above)"
    exit 1
fi

echo
echo "loom: all models passed and all injected faults were caught in $(( $(seconds) - start )) s"
