import { expect } from 'chai';
import fc from 'fast-check';
import { Command } from 'ioredis';
import { bulkCount, bulkStrings, bulkWord, EncodedArgs, encodedScriptCommand } from '../../src/redis/resp.js';

/** What ioredis itself writes for EVALSHA/EVAL with these arguments. */
function ioredisWrites(name: 'eval' | 'evalsha', args: string[]): string {
  return new Command(name, args).toWritable(undefined as never) as string;
}

describe('resp: script calls encoded by the store', () => {
  const text = fc.oneof(fc.string(), fc.string({ unit: 'grapheme' }), fc.constantFrom('', '0', 'check', 'consume', 'ü€😀'));

  it('writes the bytes ioredis would write for the same call, whichever way the arguments were added', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<'eval' | 'evalsha'>('eval', 'evalsha'),
        text,
        fc.array(text, { maxLength: 6 }),
        fc.array(fc.tuple(fc.constantFrom('add', 'word', 'encoded', 'count', 'reserved'), fc.array(text, { minLength: 1, maxLength: 3 }), fc.nat(200)), { maxLength: 12 }),
        (name, script, keys, steps) => {
          const argv = new EncodedArgs();
          const flat: string[] = [];
          for (const [how, args, n] of steps) {
            if (how === 'add') argv.add(args[0]);
            else if (how === 'word') argv.addWord(args[0]);
            else if (how === 'encoded') argv.addEncoded(bulkStrings(args), args.length);
            else if (how === 'count') argv.addEncoded(bulkCount(n), 1);
            else argv.fill(argv.reserve(), args[0]);
            if (how === 'encoded') flat.push(...args);
            else flat.push(how === 'count' ? String(n) : args[0]);
          }
          const command = encodedScriptCommand(name, script, keys, argv);
          expect(command.toWritable(undefined as never)).to.equal(ioredisWrites(name, [script, String(keys.length), ...keys, ...flat]));
          // A Cluster routes by the keys ioredis reads from the command's own arguments.
          expect(command.getKeys()).to.deep.equal(keys);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('appends one set of arguments to another, counts included', () => {
    const a = new EncodedArgs();
    a.add('x');
    const b = new EncodedArgs();
    b.addWord('group');
    const at = b.reserve();
    b.addEncoded(bulkStrings(['1', '2']), 2);
    b.fill(at, '3');
    a.append(b);
    expect(a.count).to.equal(5);
    expect(encodedScriptCommand('evalsha', 'sha', [], a).toWritable(undefined as never)).to.equal(ioredisWrites('evalsha', ['sha', '0', 'x', 'group', '3', '1', '2']));
  });

  it('encodes a word once and a count beyond the small ones as any other', () => {
    expect(bulkWord('consume')).to.equal('$7\r\nconsume\r\n');
    expect(bulkWord('consume')).to.equal(bulkWord('consume'));
    expect(bulkCount(7)).to.equal('$1\r\n7\r\n');
    expect(bulkCount(1000)).to.equal('$4\r\n1000\r\n');
    expect(bulkCount(2.5)).to.equal('$3\r\n2.5\r\n');
  });
});
