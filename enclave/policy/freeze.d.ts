/** Types of freeze.js (plain JavaScript: the action worker's trusted side loads it too). */

/** `value`, with every object and array reachable from it frozen. */
export declare function deepFreeze<T>(value: T): T;
