import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import {
  expandIncludes,
  keepsTakeLedger,
  LUA_DIR,
  loadBatchScript,
  POLICY_SCRIPT_NAMES,
  readPolicyScripts,
  loadScripts,
  readBatchScript,
  readScript,
  SCRIPT_KEY_COUNTS,
  SCRIPT_NAMES,
  stripLuaComments,
  type ScriptName,
} from '../../src/redis/lua-scripts.js';
import { startRedis, type RedisHandle } from '../support/redis.js';
import { REGION_POOL } from '../../src/regions/region-pool-protocol.js';
import { GROUP_HEADER_FIELDS } from '../../src/redis/redis-group.js';
import type { Operations, ProtocolDeclaration, ReplyFields } from '../../src/redis/script-protocol.js';

/** The scripts whose operations are declared (src/redis/script-protocol.ts): their header names each operation's arguments, after ARGV[2]. */
const PROTOCOLS: Partial<Record<ScriptName, ProtocolDeclaration<Operations, ReplyFields>>> = { region_pool: REGION_POOL };

/** How many ARGV a script's header accounts for: its ARGV lines, or with a protocol the operation and its longest argument list after them. */
function declaredArgvCount(name: ScriptName, head: string): number {
  const lines = [...head.matchAll(/^-- +ARGV\[(\d+)\]/gm)].length;
  const protocol = PROTOCOLS[name];
  return protocol ? lines + Math.max(...Object.values(protocol.operations).map((args) => args.length)) : lines;
}

/** The keys a script's header names: its own, and the take ledger of a named take or a reclaim (include "lease"). */
function keyCount(name: ScriptName): number {
  // A lease script takes its take ledger, and a share ledger after it (lua/includes/shares.lua).
  return SCRIPT_KEY_COUNTS[name] + (keepsTakeLedger(readScript(name)) ? 2 : 0);
}

/** The leading comment block of a file: every line up to the first that is not a `--` comment. */
function header(source: string): string {
  const lines: string[] = [];
  for (const line of source.split('\n')) {
    if (!line.startsWith('--')) break;
    lines.push(line);
  }
  return lines.join('\n');
}

describe('Lua scripts', function () {
  const files = readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua'));

  it('there is exactly one script file per script name, plus the batch driver', function () {
    expect(files.map((f) => f.replace(/\.lua$/, '')).sort()).to.deep.equal([...SCRIPT_NAMES, 'batch'].sort());
  });

  describe('the batch script', function () {
    it("sees every write of the operation scripts name one key, but DEL's: its reuse of HMGET replies forgets only those keys", function () {
      const batch = readFileSync(new URL('batch.lua', LUA_DIR), 'utf8');
      const reads = [...(/local READS = \{([^}]*)\}/.exec(batch)?.[1] ?? '').matchAll(/([A-Z]+) = true/g)].map((m) => m[1]);
      expect(reads).to.include('HGETALL');
      const sources = [...files.map((f) => f), ...readdirSync(new URL('includes/', LUA_DIR)).filter((f) => f.endsWith('.lua')).map((f) => `includes/${f}`)]
        .filter((f) => f !== 'batch.lua')
        .map((f) => readFileSync(new URL(f, LUA_DIR), 'utf8'));
      const commands = new Set(sources.flatMap((source) => [...source.matchAll(/redis\.p?call\('([A-Z]+)'/g)].map((m) => m[1])));
      // Writes of one key each (their other arguments are fields, members and values); a new command
      // that names several keys must forget each of them in batch.lua's wrapper, as DEL does.
      const oneKeyWrites = ['HSET', 'HDEL', 'HINCRBY', 'ZADD', 'ZREM', 'ZREMRANGEBYRANK', 'ZREMRANGEBYSCORE', 'PEXPIRE', 'PUBLISH'];
      const unknown = [...commands].filter((c) => !reads.includes(c) && !oneKeyWrites.includes(c) && !['DEL', 'HMGET', 'TIME'].includes(c));
      expect(unknown, 'commands batch.lua does not know to be single-key writes').to.deep.equal([]);
      expect(batch).to.match(/if command == 'DEL' then/);
    });

    it('reads a group operation\'s header in the order its declaration (redis-group.ts) gives', function () {
      const batch = readFileSync(new URL('batch.lua', LUA_DIR), 'utf8');
      expect(batch).to.include(`its header \`${Object.values(GROUP_HEADER_FIELDS).join(', ')}\``);
      // parse_call reads each field at its declared offset from the header's start, and skips them all.
      const at = (field: keyof typeof GROUP_HEADER_FIELDS) => Object.keys(GROUP_HEADER_FIELDS).indexOf(field);
      expect(batch).to.include(`local name = ARGV[a]`).and.to.include(`tonumber(ARGV[a + ${at('argc')}])`);
      expect(batch).to.include(`check_argv[tonumber(ARGV[a + ${at('checkPosition')}])] = ARGV[a + ${at('checkValue')}]`);
      expect(batch).to.include(`call[5] = ARGV[a + ${at('soft')}] == '1'`).and.to.include(`skip = ${Object.keys(GROUP_HEADER_FIELDS).length}`);
      expect(at('name')).to.equal(0);
    });

    it('holds every operation script (without comments), each wrapped as a function of its own KEYS and ARGV', function () {
      const batch = readBatchScript();
      for (const name of SCRIPT_NAMES) {
        const wrapped = `local function op_${name}(KEYS, ARGV)\n${stripLuaComments(readScript(name).lua)}end\n`;
        expect(batch.lua, name).to.include(wrapped);
        expect(batch.lua, name).to.include(`${name} = { run = op_${name}, key_count = ${SCRIPT_KEY_COUNTS[name]} },`);
        // A named take or a reclaim runs the same function with the take ledger as one key more.
        const ledger = `['${name}+ledger'] = { run = op_${name}, key_count = ${SCRIPT_KEY_COUNTS[name] + 1} },`;
        if (keepsTakeLedger(readScript(name))) expect(batch.lua, name).to.include(ledger);
        else expect(batch.lua, name).not.to.include(ledger);
      }
      expect(SCRIPT_NAMES.filter((name) => keepsTakeLedger(readScript(name)))).to.have.members(['fixed_window', 'sliding_window_counter', 'token_bucket', 'leaky_bucket', 'quota']);
      expect(batch.sha1).to.equal(createHash('sha1').update(batch.lua).digest('hex'));
      expect(loadBatchScript()).to.deep.equal(batch);
    });

    it('is sent without comments, blank lines or indentation: under half the size of its sources', function () {
      const batch = readBatchScript();
      expect(batch.lua).not.to.match(/--/); // no comment left, and none of the scripts has `--` in a string
      const lines = batch.lua.split('\n');
      expect(lines.pop(), 'ends with a line break').to.equal('');
      expect(lines.filter((line) => !/^\S(.*\S)?$/.test(line)), 'blank or padded lines').to.deep.equal([]);
      const sources = SCRIPT_NAMES.reduce((n, name) => n + readScript(name).lua.length, 0);
      expect(batch.lua.length).to.be.below(sources / 2);
    });
  });

  describe('stripLuaComments', function () {
    it('drops line comments, blank lines and the spaces around line breaks, and keeps every token', function () {
      const source = '-- header\n\n  local a = 1   -- one\n\tlocal b = a - -1\r\n\n--\nreturn a  +  b\n';
      expect(stripLuaComments(source)).to.equal('local a = 1\nlocal b = a - -1\nreturn a  +  b\n');
    });

    it('keeps `--` and everything else inside quoted strings, escapes included', function () {
      const source = `local s = '--not a comment' -- a comment\nlocal t = "say \\"--\\" \\\\" -- \"\nlocal u = 'it\\'s -- fine'`;
      expect(stripLuaComments(source)).to.equal(`local s = '--not a comment'\nlocal t = "say \\"--\\" \\\\"\nlocal u = 'it\\'s -- fine'\n`);
    });

    it('copies long strings byte for byte, indentation, blank lines and `--` included', function () {
      const source = 'local s = [==[\n  -- kept\n\n  ]] still inside ]==] .. x\nlocal t = [[a--b]]';
      expect(stripLuaComments(source)).to.equal('local s = [==[\n  -- kept\n\n  ]] still inside ]==] .. x\nlocal t = [[a--b]]\n');
    });

    it('turns a long comment into one space (it separates tokens) and reads `--[` without a bracket as a line comment', function () {
      expect(stripLuaComments('local a--[[ x\n y ]]= 1\nlocal b = 2 --[ not long\n--[==[\n]]\n]==]\nreturn a')).to.equal(
        'local a = 1\nlocal b = 2\nreturn a\n',
      );
    });

    it('rejects unterminated strings and long comments', function () {
      expect(() => stripLuaComments("local s = 'open\nreturn s")).to.throw(/unterminated string/);
      expect(() => stripLuaComments('local s = [[open')).to.throw(/unterminated long string/);
      expect(() => stripLuaComments('--[[ open\nreturn 1')).to.throw(/unterminated long comment/);
    });

    it('changes nothing more when run again', function () {
      const once = readBatchScript().lua;
      expect(stripLuaComments(once)).to.equal(once);
    });
  });

  for (const name of SCRIPT_NAMES) {
    describe(`${name}.lua`, function () {
      const source = readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8');
      const head = header(source);

      it('starts with a header comment naming KEYS, ARGV and the returned array', function () {
        expect(head, 'header comment').to.match(/^-- \w+: /);
        const keys = [...head.matchAll(/^-- +KEYS\[(\d+)\]/gm)].map((m) => Number(m[1]));
        expect(keys, 'KEYS lines').to.deep.equal(Array.from({ length: keyCount(name) }, (_, i) => i + 1));
        const argv = [...head.matchAll(/^-- +ARGV\[(\d+)\]/gm)].map((m) => Number(m[1]));
        expect(argv.length, 'ARGV lines').to.be.at.least(PROTOCOLS[name] ? 2 : 3);
        expect(argv, 'ARGV lines in order').to.deep.equal(argv.map((_, i) => i + 1));
        expect(head).to.match(/^-- +ARGV\[1\] +now\b/m);
        expect(head).to.match(/^-- +Returns +\{/m);
      });

      it('reads no KEYS or ARGV beyond those its header lists', function () {
        const declaredArgv = declaredArgvCount(name, head);
        const body = readScript(name).lua.split('\n').filter((l) => !l.trimStart().startsWith('--')).join('\n');
        for (const m of body.matchAll(/KEYS\[(\d+)\]/g)) expect(Number(m[1])).to.be.at.most(keyCount(name));
        for (const m of body.matchAll(/ARGV\[(\d+)\]/g)) expect(Number(m[1])).to.be.at.most(declaredArgv);
      });

      it('has its includes expanded', function () {
        const script = readScript(name);
        expect(script.lua).not.to.match(/^\s*--\s*@include/m);
        expect(script.lua).to.include('-- >>> include "time"');
        expect(script.lua).to.include(name === 'region_pool' ? 'local function reply_number(' : 'local function reply(');
        expect(script.sha1).to.equal(createHash('sha1').update(script.lua).digest('hex'));
        expect(script.numberOfKeys).to.equal(SCRIPT_KEY_COUNTS[name]);
      });
    });
  }

  describe('the policy store\'s scripts (lua/policy/*.lua)', function () {
    const policyScripts = readPolicyScripts(7);

    it('there is exactly one script file per policy script name', function () {
      const policyFiles = readdirSync(new URL('policy/', LUA_DIR)).filter((f) => f.endsWith('.lua'));
      expect(policyFiles.map((f) => f.replace(/\.lua$/, '')).sort()).to.deep.equal([...POLICY_SCRIPT_NAMES].sort());
    });

    for (const name of POLICY_SCRIPT_NAMES) {
      it(`policy/${name}.lua starts with a header comment naming its use, KEYS, ARGV or the reply`, function () {
        const head = header(readFileSync(new URL(`policy/${name}.lua`, LUA_DIR), 'utf8'));
        expect(head).to.match(new RegExp(`^-- policy ${name}: `));
        expect(head).to.match(/^-- Used by RedisPolicyStore\b/m);
        expect(head).to.match(/^-- +KEYS\[/m);
        expect(head).to.match(/^-- +(ARGV|Returns)/m);
        const script = policyScripts[name];
        expect(script.name).to.equal(`policy/${name}`);
        expect(script.numberOfKeys).to.equal(7);
        expect(script.sha1).to.equal(createHash('sha1').update(script.lua).digest('hex'));
      });
    }
  });

  describe('every include', function () {
    for (const file of readdirSync(new URL('includes/', LUA_DIR)).filter((f) => f.endsWith('.lua'))) {
      it(`${file} starts with a comment saying what it provides`, function () {
        const source = readFileSync(new URL(`includes/${file}`, LUA_DIR), 'utf8');
        expect(header(source)).to.match(new RegExp(`^-- include "${file.replace(/\.lua$/, '')}": `));
      });
    }
  });

  describe('expandIncludes', function () {
    const lib: Record<string, string> = {
      a: 'local a = 1\n',
      b: '-- @include "a"\nlocal b = a + 1',
      loop1: '-- @include "loop2"',
      loop2: '-- @include "loop1"',
      bad: '-- @include "../etc/passwd"',
    };
    const read = (name: string) => {
      if (!(name in lib)) throw new Error(`no such include ${name}`);
      return lib[name];
    };

    it('replaces an include line by the file, recursively, and each include once', function () {
      const out = expandIncludes('x\n  -- @include "b"\n-- @include "a"\ny', read);
      expect(out.split('\n')).to.deep.equal([
        'x',
        '-- >>> include "b"',
        '-- >>> include "a"',
        'local a = 1',
        '-- <<< include "a"',
        'local b = a + 1',
        '-- <<< include "b"',
        '-- (include "a" already expanded above)',
        'y',
      ]);
    });

    it('leaves other comments alone', function () {
      const source = '-- include "a" is not a directive\n-- @include a\nlocal x = 1 -- @include "a"';
      expect(expandIncludes(source, read)).to.equal(source);
    });

    it('rejects cycles, missing files and path-like names', function () {
      expect(() => expandIncludes('-- @include "loop1"', read, 's.lua')).to.throw(/include cycle loop1 -> loop2 -> loop1/);
      expect(() => expandIncludes('-- @include "nope"', read, 's.lua')).to.throw(/s\.lua: cannot read include "nope"/);
      expect(() => expandIncludes('-- @include "bad"', read)).to.throw(/bad include name/);
    });
  });

  describe('on real Redis', function () {
    this.timeout(30_000);
    let redis: RedisHandle;
    let client: Redis;

    before(async function () {
      redis = await startRedis();
      client = new Redis(redis.url);
    });

    after(async function () {
      client?.disconnect();
      await redis?.stop();
    });

    for (const name of SCRIPT_NAMES) {
      it(`SCRIPT LOAD ${name} succeeds and gives the expected SHA1`, async function () {
        const script = loadScripts()[name as ScriptName];
        const sha = await client.script('LOAD', script.lua);
        expect(sha).to.equal(script.sha1);
      });
    }

    /** The counter scripts (region_pool.lua, which counts no algorithm, has its own tests: test/regions/region-pool.test.ts). */
    const COUNTER_SCRIPTS = SCRIPT_NAMES.filter((name): name is Exclude<ScriptName, 'region_pool'> => name !== 'region_pool');
    /** ARGV after now for each script: the operation and its units (or a lease id), then a small spec's parameters. */
    const sampleArgs: Record<Exclude<ScriptName, 'region_pool'>, string[]> = {
      fixed_window: ['consume', '1', '5', '10000'],
      sliding_window_log: ['consume', '1', '5', '10000'],
      sliding_window_counter: ['consume', '1', '5', '10000', '4'],
      token_bucket: ['consume', '1', '5', '5', '10000'],
      leaky_bucket: ['consume', '1', '5', '5', '10000'],
      quota: ['consume', '1', '5', '10000'],
      concurrency_acquire: ['lease-1', '5', '10000'],
      concurrency_release: ['lease-1', '5', '10000'],
    };

    async function run(name: Exclude<ScriptName, 'region_pool'>, now: string, prefix: string): Promise<{ reply: unknown; ttls: number[] }> {
      const script = loadScripts()[name];
      const keys = script.numberOfKeys === 2 ? [`${prefix}{k}`, `${prefix}{k}:sum`] : [`${prefix}{k}`];
      if (name === 'concurrency_release') {
        await client.eval(loadScripts().concurrency_acquire.lua, 1, keys[0], now, ...sampleArgs.concurrency_acquire);
      }
      const reply = await client.eval(script.lua, keys.length, ...keys, now, ...sampleArgs[name]);
      const ttls = await Promise.all(keys.map((k) => client.pttl(k)));
      return { reply, ttls };
    }

    for (const name of COUNTER_SCRIPTS) {
      it(`${name} runs on the Redis clock (ARGV[1] empty): integer reply, keys expire with the state`, async function () {
        const { reply, ttls } = await run(name, '', `t:lua:${name}:${Date.now()}:`);
        // An acquire also says whether it took a new slot.
        expect(reply).to.be.an('array').with.lengthOf(name === 'concurrency_acquire' ? 5 : 4);
        for (const v of reply as unknown[]) expect(v).to.be.a('number');
        expect((reply as number[])[0]).to.equal(1);
        if (name === 'concurrency_release') {
          expect(ttls).to.deep.equal([-2]); // the last lease went, and with it the key
        } else {
          for (const ttl of ttls) expect(ttl).to.be.within(1, 20_000); // at most window + one bucket
        }
      });

      if (name !== 'concurrency_release') {
        it(`${name} with an explicit time pads every expiry (test clocks may lag the Redis clock)`, async function () {
          const { ttls } = await run(name, String(Date.now() - 3_600_000), `t:lua:${name}:pad:${Date.now()}:`);
          for (const ttl of ttls) expect(ttl).to.be.within(60_001, 80_000);
        });
      }
    }

    describe('the batch script', function () {
      const batch = loadBatchScript();
      /** Per operation: name, keys, ARGV (explicit times, so both runs see the same clock). */
      type Call = { name: ScriptName; keys: string[]; argv: string[] };
      const T = String(Math.floor(Date.now() / 3_600_000) * 3_600_000 + 1_000);
      const callsOn = (prefix: string): Call[] => {
        const calls: Call[] = [];
        for (let round = 0; round < 3; round++) {
          for (const name of COUNTER_SCRIPTS) {
            // Acquire and release share the lease set, so the releases find leases.
            const tag = name.startsWith('concurrency') ? 'concurrency' : name;
            const keys = SCRIPT_KEY_COUNTS[name] === 2 ? [`${prefix}{${tag}}`, `${prefix}{${tag}}:sum`] : [`${prefix}{${tag}}`];
            const lease = name.startsWith('concurrency') ? 'lease-1' : undefined;
            const [first, ...params] = sampleArgs[name];
            // Two counters per algorithm, interleaved, so the batch mixes keys as well as algorithms.
            calls.push({ name, keys, argv: [T, lease ?? first, ...params] });
            const second = lease ? [lease, ...params] : ['consume', '2', ...params.slice(1)];
            calls.push({ name, keys: keys.map((k) => k.replace('}', ':b}')), argv: [String(Number(T) + round), ...second] });
          }
        }
        return calls;
      };
      const batchArgs = (calls: Call[]): [number, ...string[]] => {
        const keys = calls.flatMap((c) => c.keys);
        return [keys.length, ...keys, ...calls.flatMap((c) => [c.name, String(c.argv.length), ...c.argv])];
      };

      it('SCRIPT LOAD succeeds and gives the expected SHA1', async function () {
        expect(await client.script('LOAD', batch.lua)).to.equal(batch.sha1);
      });

      it('gives exactly the replies of the operation scripts run one by one, in order', async function () {
        const prefix = `t:lua:batch:${Date.now()}:`;
        const oneByOne: unknown[] = [];
        for (const call of callsOn(`${prefix}single:`)) {
          oneByOne.push(await client.eval(loadScripts()[call.name].lua, call.keys.length, ...call.keys, ...call.argv));
        }
        const batched = await client.eval(batch.lua, ...batchArgs(callsOn(`${prefix}batch:`)));
        expect(batched).to.deep.equal(oneByOne);
        expect((batched as unknown[]).filter((r) => Array.isArray(r) && r[0] === 1), 'admitted').to.have.length.above(20);
        // Both runs left the same state behind.
        const suffixes = (await client.keys(`${prefix}single:*`)).map((k) => k.slice(`${prefix}single:`.length)).sort();
        expect(suffixes).to.have.length.of.at.least(12); // two counters of each rate algorithm and the logs' :sum
        expect((await client.keys(`${prefix}batch:*`)).map((k) => k.slice(`${prefix}batch:`.length)).sort()).to.deep.equal(suffixes);
        for (const suffix of suffixes) {
          expect(await client.dumpBuffer(`${prefix}batch:${suffix}`), suffix).to.deep.equal(await client.dumpBuffer(`${prefix}single:${suffix}`));
        }
      });

      it('an operation that fails fails alone: its entry is the error, the others run', async function () {
        const prefix = `t:lua:batch:fail:${Date.now()}:`;
        await client.set(`${prefix}{broken}`, 'not a hash');
        const reply = (await client.eval(
          batch.lua,
          3,
          `${prefix}{ok}`,
          `${prefix}{broken}`,
          `${prefix}{ok}`,
          'fixed_window', '5', T, 'consume', '1', '5', '10000',
          'fixed_window', '5', T, 'consume', '1', '5', '10000',
          'fixed_window', '5', 'soon', 'consume', '1', '5', '10000',
        )) as unknown[];
        expect(reply).to.have.lengthOf(3);
        expect(reply[0]).to.deep.equal([1, 4, 0, 10_000 - (Number(T) % 10_000)]);
        expect(reply[1]).to.be.a('string').that.matches(/^WRONGTYPE/);
        expect(reply[2]).to.be.a('string').that.includes('ARGV[1] (now) must be a number or empty');
        expect(await client.hget(`${prefix}{ok}`, 'u')).to.equal('1');
      });

      it('rejects a malformed call before running any operation', async function () {
        const key = `t:lua:batch:bad:${Date.now()}:{k}`;
        const attempts: [number, ...string[]][] = [
          [1, key, 'fixed_window', '5', T, 'consume', '1', '5', '10000', 'no_such_operation', '1', T],
          [1, key, 'fixed_window', '9', T, 'consume', '1', '5', '10000'],
          [2, key, `${key}:2`, 'fixed_window', '5', T, 'consume', '1', '5', '10000'],
        ];
        for (const args of attempts) {
          let message = '';
          try {
            await client.eval(batch.lua, ...args);
          } catch (err) {
            message = (err as Error).message;
          }
          expect(message, JSON.stringify(args)).to.match(/rl batch: /);
        }
        expect(await client.exists(key)).to.equal(0);
      });
    });

    it('rejects a now that is not a number', async function () {
      const script = loadScripts().fixed_window;
      let message = '';
      try {
        await client.eval(script.lua, 1, 't:lua:bad-now', 'soon', 'consume', '1', '5', '1000');
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).to.include('ARGV[1] (now) must be a number or empty');
    });
  });
});
