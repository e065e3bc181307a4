/** The counter scripts under lua/ that the counter store calls by name (each also a batch operation). */
export type ScriptName =
  | 'fixed_window'
  | 'sliding_window_log'
  | 'sliding_window_counter'
  | 'token_bucket'
  | 'leaky_bucket'
  | 'quota'
  | 'concurrency_acquire'
  | 'concurrency_release'
  | 'region_pool';
