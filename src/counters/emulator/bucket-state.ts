/** What token_bucket and leaky_bucket store per key (the scripts' hash fields). */
export interface BucketState { amount: number; updatedAt: number; settledAt: number }
