import { runUntilSignalled } from '@toolgate/service-kit';
import { loadJournalConfig } from './config';
import { startJournal } from './journal.service';

void runUntilSignalled('journal', () => startJournal({ config: loadJournalConfig(process.env) }));
